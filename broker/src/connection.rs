//! One client connection, served on the shard that accepted it.
//!
//! The read side decodes frames and starts a handler task per request; the write side takes
//! those tasks in request order and writes each response (Kafka requires responses in request
//! order on a connection). Backpressure: at most [`IN_FLIGHT_REQUESTS_MAX`] requests are
//! pending per connection, so a client that stops reading its responses stops being read.
//! Any frame or header that does not decode closes this connection only.
//!
//! Requests run concurrently, except the group-coordinator APIs, which run one after another
//! per connection as Kafka runs every request: a client that commits and then fetches its
//! offsets (or joins and then syncs) without waiting for the answers sees them in order.
//!
//! On a SASL listener the client authenticates first (`crate::sasl`: its frames go to the
//! authenticator, at most `sasl::UNAUTHENTICATED_FRAME_MAX_BYTES` each, until it succeeds;
//! a failure is answered after `connection.failed.authentication.delay.ms`, then the
//! connection closes). A session with a lifetime (KIP-368) may re-authenticate on the open
//! connection — its frames go to the authenticator again while earlier responses still go out
//! in order — and a request after it expired closes the connection. On a TLS listener the handshake comes first (`crate::tls`; a failed one closes this
//! connection only), and responses are written through the TLS stream: record bytes are copied
//! and encrypted there. On a plaintext listener they leave zero-copy (`crate::send`).

use crate::authz::AclOperation;
use crate::handlers;
use crate::response::Response;
use crate::rt::local_channel::{self, LocalReceiver};
use crate::rt::JoinHandle;
use crate::rt::TcpStream;
use crate::sasl::{Now, SaslListener, SaslServer, SessionStep, Step};
use crate::session::Session;
use crate::shard::Shard;
use crate::tls::ListenerTls;
use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use net::kafka_protocol::messages::ApiKey;
use net::{decode_frame, decode_request, FrameStatus, NetError};
use std::cell::RefCell;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;

/// Requests decoded but not yet answered, per connection.
pub const IN_FLIGHT_REQUESTS_MAX: usize = 16;
/// Fewest bytes asked of the socket per read call.
const READ_CHUNK_BYTES: usize = 64 << 10;
/// Most bytes asked per read call. The read buffer doubles only after a read filled it, so it
/// grows with bytes actually received, never with the size a frame header announces (a client
/// that declares a 100 MB frame and sends a few bytes costs no more than the first 64 KiB).
const READ_CHUNK_MAX_BYTES: usize = 1 << 20;

/// Frames up to this size are copied out of the read buffer into their own allocation. A
/// frame is a slice of a read chunk of at least [`READ_CHUNK_BYTES`], and the batch cache
/// keeps a produced batch's bytes for later fetches: without the copy every cached 1 KiB
/// record would pin a whole 64 KiB chunk (measured: 2.5 GiB RSS for a 64 MiB cache). Larger
/// frames fill most of their chunk and stay zero-copy.
const COPY_FRAME_MAX_BYTES: usize = 16 << 10;

/// A pending response: the handler task.
type PendingResponse = JoinHandle<Response>;

/// Resolves when the connection's previous group-coordinator request has finished.
type GroupTurn = futures_channel::oneshot::Receiver<()>;

/// The APIs served one at a time per connection (see the module doc).
fn is_group_api(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::FindCoordinator
            | ApiKey::JoinGroup
            | ApiKey::SyncGroup
            | ApiKey::Heartbeat
            | ApiKey::LeaveGroup
            | ApiKey::OffsetCommit
            | ApiKey::OffsetFetch
            | ApiKey::ListGroups
            | ApiKey::DescribeGroups
            | ApiKey::DeleteGroups
            | ApiKey::OffsetDelete
    )
}

/// A Kafka listener as its connections see it.
pub struct ListenerContext {
    /// The listener name, upper case.
    pub name: Rc<str>,
    /// Its TLS side (`SSL`, `SASL_SSL`); `None` on a plaintext listener. Replaced when the
    /// listener's key store changes at run time (new connections get the new one).
    pub tls: RefCell<Option<ListenerTls>>,
    /// Its SASL settings (`SASL_PLAINTEXT`, `SASL_SSL`); `None` when clients need not
    /// authenticate.
    pub sasl: Option<Arc<SaslListener>>,
}

/// Serves `stream`, a connection to `listener`, until the client closes it or sends
/// something undecodable.
pub async fn serve(shard: Rc<Shard>, stream: TcpStream, listener: Rc<ListenerContext>) {
    let _counted = shard.stop.connection();
    let peer = stream.peer_addr().ok();
    let mut client = Session::anonymous(
        // Kafka's spelling of a member's host in DescribeGroups.
        peer.map_or_else(String::new, |p| format!("/{}", p.ip()))
            .into(),
        listener.name.clone(),
    );
    let sasl = match listener
        .sasl
        .clone()
        .map(|l| (l, crate::sasl::server_nonce()))
    {
        None => None,
        Some((l, Ok(nonce))) => Some(SaslServer::new(l, nonce)),
        Some((_, Err(e))) => {
            tracing::error!(?peer, error = %e, "closing connection: no randomness for a SCRAM nonce");
            return;
        }
    };
    let tls = listener.tls.borrow().clone();
    let Some(tls) = tls else {
        let fd = stream.as_raw_fd();
        return serve_stream(shard, stream, Some(fd), client, sasl).await;
    };
    match tls.accept(stream).await {
        Ok((stream, principal)) => {
            if let Some(name) = principal {
                client.principal = format!("User:{name}");
            }
            tracing::debug!(?peer, listener = %client.listener, principal = %client.principal, "TLS client accepted");
            serve_stream(shard, stream, None, client, sasl).await;
        }
        Err(e) => {
            tracing::info!(?peer, listener = %client.listener, error = %e, "closing connection: TLS");
        }
    }
}

/// Serves a connection's (plaintext or decrypted) byte stream. `fd`: the socket, when
/// responses may leave it zero-copy (plaintext only); `sasl`: the authenticator its frames go
/// to until the client is authenticated, and while it re-authenticates.
async fn serve_stream<S>(
    shard: Rc<Shard>,
    stream: S,
    fd: Option<RawFd>,
    client: Session,
    mut sasl: Option<SaslServer>,
) where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let peer = client.client_host.clone();
    // Shared by the connection's requests; replaced whenever SASL names the principal.
    let mut session = Rc::new(client);
    let (mut reader, writer) = futures_lite::io::split(stream);
    let (queue, pending) = local_channel::new_bounded::<PendingResponse>(IN_FLIGHT_REQUESTS_MAX);
    let write_side = crate::rt::spawn_local(write_responses(fd, writer, pending));
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    // The socket is read into this buffer, kept for the connection's life, and what arrived is
    // copied into `buf`: no fresh zeroed buffer per read (a 64 KiB `memset` and allocation per
    // request before), at the cost of copying the bytes actually received.
    let mut scratch: Vec<u8> = vec![0; READ_CHUNK_BYTES];
    let mut group_turn: Option<GroupTurn> = None;
    'read: loop {
        let frame_remaining = loop {
            let max_frame = match &sasl {
                Some(s) if !s.is_authenticated() => crate::sasl::UNAUTHENTICATED_FRAME_MAX_BYTES,
                _ => shard.config.socket_request_max_bytes,
            };
            match decode_frame(&mut buf, max_frame) {
                Ok(FrameStatus::Frame(frame)) => {
                    let frame = if frame.len() <= COPY_FRAME_MAX_BYTES {
                        Bytes::copy_from_slice(&frame)
                    } else {
                        frame
                    };
                    if let Some(server) = sasl.as_mut().filter(|s| s.is_authenticated()) {
                        let fresh_nonce = || {
                            crate::sasl::server_nonce()
                                .map_err(|e| tracing::error!(%peer, error = %e, "no randomness for a SCRAM nonce"))
                                .ok()
                        };
                        match server.on_authenticated_frame(
                            &frame,
                            std::time::Instant::now(),
                            fresh_nonce,
                        ) {
                            SessionStep::Serve | SessionStep::Reauthenticate => {}
                            SessionStep::Expired => {
                                tracing::info!(%peer, principal = %session.principal, "closing connection: SASL session expired");
                                break 'read;
                            }
                        }
                    }
                    if let Some(server) = sasl.as_mut().filter(|s| !s.is_authenticated()) {
                        let credentials = &shard.metadata().scram_credentials;
                        match server.on_frame(
                            frame.clone(),
                            handlers::supported_versions(),
                            credentials,
                            Now::system(),
                        ) {
                            Step::Serve => {}
                            Step::Answer(answer) => {
                                if queue.send(ready(Response::Whole(answer))).await.is_err() {
                                    break 'read;
                                }
                                continue;
                            }
                            Step::Authenticated { answer, principal } => {
                                tracing::debug!(%peer, %principal, "SASL client authenticated");
                                session = Rc::new(session.authenticated(principal));
                                if queue.send(ready(Response::Whole(answer))).await.is_err() {
                                    break 'read;
                                }
                                continue;
                            }
                            Step::AnswerThenClose { answer, delayed } => {
                                let delay = if delayed {
                                    tracing::info!(%peer, listener = %session.listener, "failed SASL authentication");
                                    shard.config.connection_failed_authentication_delay()
                                } else {
                                    std::time::Duration::ZERO
                                };
                                let answer = crate::rt::spawn_local(async move {
                                    crate::rt::sleep(delay).await;
                                    Response::Whole(answer)
                                });
                                let _ = queue.send(answer.detach()).await;
                                let _ = queue.send(ready(Response::Close)).await;
                                break 'read;
                            }
                            Step::Close => {
                                tracing::debug!(%peer, "closing connection: a request out of SASL order");
                                break 'read;
                            }
                        }
                    }
                    // A client over its quota reads nothing more until its throttle ends
                    // (KIP-219: the channel is muted).
                    if let Some(left) = session.throttle_left() {
                        crate::rt::sleep(left).await;
                    }
                    let Some(task) = start_request(&shard, frame, &session, &mut group_turn) else {
                        break 'read;
                    };
                    if queue.send(task).await.is_err() {
                        break 'read;
                    }
                }
                Ok(FrameStatus::NeedBytes(n)) => break n,
                Err(e) => {
                    tracing::debug!(?peer, error = %e, "closing connection: bad frame");
                    break 'read;
                }
            }
        };
        let want = frame_remaining.clamp(READ_CHUNK_BYTES, scratch.len());
        // Shutdown ends the read side like an end of stream; queued responses still go out.
        let read = futures_lite::future::or(reader.read(&mut scratch[..want]), async {
            shard.stop.requested().await;
            Ok(0)
        });
        match read.await {
            Ok(0) | Err(_) => break,
            // Reuses `buf`'s allocation once the frames split off it are gone.
            Ok(n) => {
                buf.extend_from_slice(&scratch[..n]);
                if n == scratch.len() && n < READ_CHUNK_MAX_BYTES {
                    // Filled: the next read may take twice as much (zeroed once, kept).
                    scratch.resize(n * 2, 0);
                }
            }
        }
    }
    drop(queue);
    let _ = write_side.await;
}

/// The write side: takes the handler tasks in request order and writes each response; every
/// response that is ready leaves in one vectored send (on plaintext, `fd`; through `writer`,
/// copied, otherwise). Ends when the read side is done and every response is out, or when the
/// connection must close.
async fn write_responses<W: AsyncWrite + Unpin>(
    fd: Option<RawFd>,
    mut writer: W,
    pending: LocalReceiver<PendingResponse>,
) {
    // Every response that is ready leaves in one vectored send.
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut waiting: Option<PendingResponse> = None;
    let mut closing = false;
    while !closing {
        let task = match waiting.take() {
            Some(task) => task,
            None => match pending.recv().await {
                Some(task) => task,
                None => break,
            },
        };
        closing = !take_response(task.await, &mut chunks);
        while !closing {
            // The next responses, as far as their handlers have already finished.
            let Some(Some(mut task)) = futures_lite::future::poll_once(pending.recv()).await else {
                break;
            };
            match futures_lite::future::poll_once(&mut task).await {
                Some(response) => closing = !take_response(response, &mut chunks),
                None => {
                    waiting = Some(task);
                    break;
                }
            }
        }
        let sent = match fd {
            Some(fd) => crate::send::send_chunks(fd, &mut writer, &chunks).await,
            None => write_copied(&mut writer, &chunks).await,
        };
        if sent.is_err() {
            return;
        }
        chunks.clear();
    }
    let _ = writer.close().await;
}

/// A response that is already known, as a pending one.
fn ready(response: Response) -> PendingResponse {
    crate::rt::spawn_local(async move { response }).detach()
}

/// Writes `chunks` through `writer` (a TLS stream: each chunk is copied into TLS records)
/// and flushes them out.
async fn write_copied<W: AsyncWrite + Unpin>(
    writer: &mut W,
    chunks: &[Bytes],
) -> std::io::Result<()> {
    for chunk in chunks {
        writer.write_all(chunk).await?;
    }
    writer.flush().await
}

/// Adds a finished handler's response frame to `chunks`; `false` when the connection must
/// close after what is already there (a response that could not be built, or a lost task).
fn take_response(response: Option<Response>, chunks: &mut Vec<Bytes>) -> bool {
    match response {
        Some(Response::Whole(frame)) => {
            chunks.push(frame);
            true
        }
        Some(Response::Frame(frame)) => {
            chunks.extend(frame);
            true
        }
        Some(Response::None) => true,
        Some(Response::Close) | None => false,
    }
}

/// Decodes `frame` and starts its handler; a group-coordinator request first waits for the
/// connection's previous one (`group_turn`). `None`: the connection must close.
fn start_request(
    shard: &Rc<Shard>,
    frame: Bytes,
    session: &Rc<Session>,
    group_turn: &mut Option<GroupTurn>,
) -> Option<PendingResponse> {
    if crate::controller::forward::is_forwarded(&frame) {
        // Another broker's request for the active controller (not a client's). Kafka
        // authorizes what brokers send the controller (BrokerHeartbeat, Envelope, …) with
        // CLUSTER_ACTION on the cluster: a client without it is closed on.
        if !crate::authz::cluster(shard, session, AclOperation::ClusterAction) {
            tracing::warn!(principal = %session.principal, listener = %session.listener, "closing connection: a forwarded controller request without CLUSTER_ACTION on the cluster");
            return Some(ready(Response::Close));
        }
        let shard = shard.clone();
        let task = async move { crate::controller::serve_forwarded(&shard, frame).await };
        return Some(crate::rt::spawn_local(task).detach());
    }
    match decode_request(frame, handlers::supported_versions()) {
        Ok(request) => {
            let queue = shard.queues.for_api(request.api_key);
            let shard = shard.clone();
            let session = session.clone();
            let (previous, done) = if is_group_api(request.api_key) {
                let (done, next_turn) = futures_channel::oneshot::channel();
                (group_turn.replace(next_turn), Some(done))
            } else {
                (None, None)
            };
            let task = async move {
                if let Some(previous) = previous {
                    // Err: the previous task is gone (connection closing); go on regardless.
                    let _ = previous.await;
                }
                let response = handlers::handle(&shard, request, &session).await;
                if let Some(done) = done {
                    let _ = done.send(());
                }
                response
            };
            Some(crate::shard::spawn_task_into(queue, task).detach())
        }
        Err(NetError::UnsupportedVersion {
            api_key: ApiKey::ApiVersions,
            correlation_id,
            ..
        }) => {
            // KIP-511: answer in the v0 layout with UNSUPPORTED_VERSION and our ranges.
            let response = net::encode_api_versions_unsupported(
                correlation_id,
                handlers::supported_versions(),
            );
            let response = response.map_or(Response::Close, Response::Whole);
            Some(crate::rt::spawn_local(async move { response }).detach())
        }
        Err(e) => {
            tracing::debug!(error = %e, "closing connection: request does not decode");
            None
        }
    }
}
