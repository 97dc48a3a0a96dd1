//! [`TcpTransport`]: the controller quorum's [`Transport`] over TCP on the shard runtime (`crate::rt`) — opaque
//! frames between the voters of `controller.quorum.voters` and the controllers a voter change
//! added (KIP-853; their addresses from a [`PeerResolver`]; the raft codec inside the frames is
//! checked by the `QuorumNode`, not here).
//!
//! Tasks, all on the shard that binds the transport and all cancelled when it is dropped:
//! - one accept loop over this node's voter listener (bound by `crate::listener`), taking at most
//!   [`INBOUND_CONNECTIONS_MAX`] connections at a time (at most [`FORWARDED_CONNECTIONS_MAX`]
//!   of them forwarding requests, the rest kept for the voters); each is read by its own task: the hello
//!   ([`super::wire`]) within [`HELLO_TIMEOUT`], then frames into the inbound queue. A hello
//!   naming this node itself or a negative id, a malformed frame or a read error closes that
//!   connection only; a hello naming any other node is accepted (a lagging node must hear a
//!   member added after what it applied), so the listener's security decides who connects. A voter's newest connection replaces its older one (closed), so a
//!   peer that reconnects after a partition leaves no half-open connection behind;
//! - one writer per peer (each configured voter from the start, another at its first frame),
//!   draining that voter's outbound queue into one connection,
//!   opened lazily (when a frame is waiting) with the hello naming this node, and reopened
//!   after a failure (or a flush taking longer than [`WRITE_TIMEOUT`]: a peer gone without a
//!   reset) with a backoff doubling from [`RECONNECT_BACKOFF_MIN`] to
//!   [`RECONNECT_BACKOFF_MAX`].
//!
//! Invariants and limits:
//! 1. [`Transport::send`] never waits: it queues (at most [`OUTBOUND_FRAMES_MAX`] frames and
//!    [`OUTBOUND_BYTES_MAX`] bytes per voter, else [`TransportError::QueueFull`]);
//! 2. the inbound queue holds at most [`INBOUND_FRAMES_MAX`] frames and [`INBOUND_BYTES_MAX`]
//!    bytes; when full, the newest frame is dropped (Raft retries);
//! 3. [`Transport::recv`] is cancel-safe (see [`super::queue`]);
//! 4. delivery is best effort, as the seam allows: frames queued for a voter that cannot be
//!    reached are dropped at each failed connection attempt, and a frame being written when
//!    a connection fails is lost.
//!
//! Forwarded controller requests ([`ForwardedRequests`]): a connection whose first four bytes
//! are not the hello's magic is a broker's request to the controller (a length-prefixed
//! frame, as on a Kafka listener: `crate::controller::forward`), not a voter's. With a
//! handler, each such frame is answered on the same connection, one at a time (so that
//! broker-only nodes reach a controller-only active controller, and observers fetch the
//! metadata log), each within [`FORWARDED_READ_TIMEOUT`]; without one it is closed as a
//! stranger. The listener is as trusted as its
//! security makes it: its clients are the cluster's own nodes.
//!
//! Each direction between two voters has its own connection (the connecting side writes,
//! the accepting side reads), so there is no race over who connects.
//!
//! Security ([`VoterSecurity`], from the first of `controller.listener.names` mapped through
//! `listener.security.protocol.map`): `PLAINTEXT` by default; with `SSL` every inbound
//! connection runs the TLS server handshake (that listener's `ssl.*` keys: with
//! `ssl.client.auth=required` a voter whose certificate the trust store does not vouch for is
//! refused) before its hello (within `crate::tls::TLS_HANDSHAKE_TIMEOUT`), and every outbound one the client
//! handshake (its key store as the client certificate; the peer's certificate is checked
//! against the voter's address in `controller.quorum.voters`, an IP address, unless
//! `ssl.endpoint.identification.algorithm` is empty).

use super::queue::FrameQueue;
use super::wire::{self, FRAME_BYTES_MAX};
use crate::listener::{Handoff, Incoming};
use crate::peer::{PeerConfigError, PeerSecurity, PeerStream};
use crate::rt::JoinHandle;
use crate::rt::TcpStream;
use crate::tls::ListenerTls;
use bytes::Bytes;
use futures_lite::io::{BufReader, BufWriter};
use futures_lite::{future, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use replication::runtime::{LocalBoxFuture, NodeId, Transport, TransportError};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;
use tuning::config::BrokerConfig;

/// Most frames queued towards one voter.
pub const OUTBOUND_FRAMES_MAX: usize = 1024;
/// Most bytes queued towards one voter (room for two of the largest frames).
pub const OUTBOUND_BYTES_MAX: usize = 2 * FRAME_BYTES_MAX;
/// Most frames received and not yet taken by [`Transport::recv`].
pub const INBOUND_FRAMES_MAX: usize = 4096;
/// Most bytes received and not yet taken by [`Transport::recv`].
pub const INBOUND_BYTES_MAX: usize = 2 * FRAME_BYTES_MAX;
/// Most inbound connections of nodes that forward requests ([`ForwardedRequests`]: brokers,
/// observers' fetches) open at once; more are closed as they are recognised, so that they
/// never take the voters' room.
pub const FORWARDED_CONNECTIONS_MAX: usize = 1024;
/// Inbound connections kept for the voters beyond [`FORWARDED_CONNECTIONS_MAX`] (a voter that
/// reconnects may briefly hold two).
pub const VOTER_CONNECTIONS_RESERVED: usize = 64;
/// Most inbound connections open at once, of every kind (a connection not yet recognised
/// counts until its hello timeout).
pub const INBOUND_CONNECTIONS_MAX: usize = FORWARDED_CONNECTIONS_MAX + VOTER_CONNECTIONS_RESERVED;
/// How long a forwarded request may take to arrive, from the end of the previous answer (or
/// the connection's first bytes) to its last byte; an idle connection is closed after it.
pub const FORWARDED_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an accepted connection may take to send its hello.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long writing out the queued frames may take before the connection is given up.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The wait after the first failed connection attempt; it doubles with each further one.
pub const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(50);
/// The longest wait between two connection attempts.
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Bytes buffered per outbound connection before a write to the socket.
const WRITE_BUFFER_BYTES: usize = 64 << 10;
/// Bytes buffered per inbound connection.
const READ_BUFFER_BYTES: usize = 64 << 10;

const _: () = assert!(RECONNECT_BACKOFF_MIN.as_nanos() <= RECONNECT_BACKOFF_MAX.as_nanos());
const _: () = assert!(OUTBOUND_BYTES_MAX >= FRAME_BYTES_MAX);
const _: () = assert!(INBOUND_BYTES_MAX >= FRAME_BYTES_MAX);

/// How the voters secure their connections (see the module documentation): shared, immutable.
#[derive(Clone, Default)]
pub struct VoterSecurity {
    /// The TLS server side of this voter's listener (`None`: plaintext).
    pub server: Option<ListenerTls>,
    /// The client side towards the other voters.
    pub client: PeerSecurity,
}

impl VoterSecurity {
    /// From the controller listener of `config` (plaintext without `controller.listener.names`).
    /// Blocking (reads key files): call at start-up.
    ///
    /// # Errors
    /// [`PeerConfigError`] naming the key at fault.
    pub fn new(config: &BrokerConfig) -> Result<VoterSecurity, PeerConfigError> {
        let server = match config.controller_listener() {
            Some((name, protocol)) if protocol.uses_tls() => Some(ListenerTls::new(config, name)?),
            _ => None,
        };
        Ok(VoterSecurity {
            server,
            client: PeerSecurity::controller(config)?,
        })
    }
}

/// The controller's side of forwarded requests arriving on the voter listener (see the module
/// documentation): `serve` takes a frame without its length prefix and the peer that sent it,
/// and returns the whole reply frame, or `None` to close the connection.
#[derive(Clone)]
pub struct ForwardedRequests {
    /// Largest request frame, bytes; a longer one closes the connection.
    pub frame_bytes_max: usize,
    /// Answers one request frame.
    pub serve: Rc<ServeForwarded>,
}

/// Answers one forwarded request frame from a peer: the reply frame, `None` to close.
pub type ServeForwarded = dyn Fn(Bytes, Rc<ForwardingPeer>) -> LocalBoxFuture<Option<Bytes>>;

/// Who sent forwarded requests on a connection of the voter listener (what authorizes them).
#[derive(Clone, Debug, Default)]
pub struct ForwardingPeer {
    /// Its address, when the socket has one.
    pub addr: Option<SocketAddr>,
    /// The principal name its TLS client certificate maps to (`ssl.principal.mapping.rules`);
    /// `None` on a plaintext listener or without a certificate.
    pub principal: Option<String>,
}

/// The transport's tasks, cancelled when it is dropped.
#[derive(Default)]
struct Tasks {
    /// The listener and the writers.
    fixed: Vec<JoinHandle<()>>,
    /// Inbound connections by number; each removes itself when it ends. At most
    /// [`INBOUND_CONNECTIONS_MAX`].
    readers: BTreeMap<u64, JoinHandle<()>>,
    /// The live connection of each voter that sent its hello (a reader's number).
    by_voter: BTreeMap<NodeId, u64>,
    /// The connections serving forwarded requests (readers' numbers), at most
    /// [`FORWARDED_CONNECTIONS_MAX`].
    forwarding: BTreeSet<u64>,
    next_reader: u64,
}

impl Tasks {
    /// Reader `number` heard voter `from`'s hello: its older connection, if any, is closed.
    fn hello(&mut self, from: NodeId, number: u64) {
        if let Some(older) = self.by_voter.insert(from, number) {
            if let Some(handle) = self.readers.remove(&older) {
                handle.cancel();
            }
        }
    }

    /// Reader `number` sends forwarded requests: whether there is room for it.
    fn forwarding(&mut self, number: u64) -> bool {
        if self.forwarding.len() >= FORWARDED_CONNECTIONS_MAX {
            return false;
        }
        self.forwarding.insert(number);
        true
    }

    /// Reader `number` ended.
    fn ended(&mut self, number: u64) {
        self.readers.remove(&number);
        self.forwarding.remove(&number);
        self.by_voter.retain(|_, n| *n != number);
    }
}

/// Where a node that is not among the configured voters is reached (a controller a voter
/// change added, KIP-853): its address from the metadata image, or from a voter asked at
/// start (`controller.quorum.bootstrap.servers`). `None`: not known (yet).
pub type PeerResolver = Rc<dyn Fn(NodeId) -> Option<SocketAddr>>;

/// The controller quorum's transport over TCP (see the module documentation). Owned by one
/// shard; dropping it closes its listener and every connection.
pub struct TcpTransport {
    this: NodeId,
    /// Outbound queues by peer (this node excluded): the configured voters from the start,
    /// others added at their first frame once `resolve` knows their address. Bounded by the
    /// nodes ever in the quorum.
    peers: RefCell<BTreeMap<NodeId, FrameQueue>>,
    resolve: PeerResolver,
    client: PeerSecurity,
    inbox: FrameQueue,
    local_addr: Option<SocketAddr>,
    tasks: Rc<RefCell<Tasks>>,
}

impl TcpTransport {
    /// Starts the transport of voter `this` on the current shard executor: serves the
    /// connections of `listen` (this node's voter listener, bound before the executors started,
    /// see `crate::listener`, with its address; `None`: no listener, for a quorum of this node
    /// alone) and sends to `peers`, the configured voters by node id with their addresses, and
    /// to any other node `resolve` knows. A hello naming any other node is accepted (a voter
    /// change may add members a lagging node has not heard of yet): the listener's security
    /// decides who connects.
    pub fn start(
        this: NodeId,
        listen: Option<(Handoff, SocketAddr)>,
        peers: &BTreeMap<NodeId, SocketAddr>,
        resolve: PeerResolver,
        security: VoterSecurity,
        forwarded: Option<ForwardedRequests>,
    ) -> TcpTransport {
        assert!(
            !peers.contains_key(&this),
            "node {this:?} is not its own peer"
        );
        let tasks = Rc::new(RefCell::new(Tasks::default()));
        let inbox = FrameQueue::new(INBOUND_FRAMES_MAX, INBOUND_BYTES_MAX);
        let mut local_addr = None;
        if let Some((handoff, addr)) = listen {
            local_addr = Some(addr);
            let accept = accept_loop(
                handoff.incoming(),
                security.server.clone(),
                this,
                inbox.clone(),
                Rc::downgrade(&tasks),
                forwarded,
            );
            let handle = crate::rt::spawn_local(accept).detach();
            tasks.borrow_mut().fixed.push(handle);
        }
        let transport = TcpTransport {
            this,
            peers: RefCell::new(BTreeMap::new()),
            resolve,
            client: security.client.clone(),
            inbox,
            local_addr,
            tasks,
        };
        for (&to, &addr) in peers {
            transport.add_peer(to, addr);
        }
        transport
    }

    /// Starts the writer towards `to` at `addr`; returns its queue.
    fn add_peer(&self, to: NodeId, addr: SocketAddr) -> FrameQueue {
        let queue = FrameQueue::new(OUTBOUND_FRAMES_MAX, OUTBOUND_BYTES_MAX);
        let writer = write_loop(self.this, to, addr, queue.clone(), self.client.clone());
        let handle = crate::rt::spawn_local(writer).detach();
        self.tasks.borrow_mut().fixed.push(handle);
        self.peers.borrow_mut().insert(to, queue.clone());
        queue
    }

    /// The address the listener is bound to (`None` without a listener).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        let tasks = std::mem::take(&mut *self.tasks.borrow_mut());
        for handle in tasks.fixed.iter().chain(tasks.readers.values()) {
            handle.cancel();
        }
    }
}

impl Transport for TcpTransport {
    type Message = Bytes;

    /// Queues `frame` for peer `to`. Errors: [`TransportError::Unreachable`] for this node, a
    /// node whose address is not known, or a frame outside 1..=[`FRAME_BYTES_MAX`] bytes (it
    /// could never be delivered); [`TransportError::QueueFull`] when `to`'s queue holds
    /// [`OUTBOUND_FRAMES_MAX`] frames or [`OUTBOUND_BYTES_MAX`] bytes.
    fn send(&self, to: NodeId, frame: Bytes) -> Result<(), TransportError> {
        if frame.is_empty() || frame.len() > FRAME_BYTES_MAX || to == self.this {
            return Err(TransportError::Unreachable { to });
        }
        let known = self.peers.borrow().get(&to).cloned();
        let queue = match known {
            Some(queue) => queue,
            None => match (self.resolve)(to) {
                Some(addr) => self.add_peer(to, addr),
                None => return Err(TransportError::Unreachable { to }),
            },
        };
        queue
            .push(to, frame)
            .map_err(|_| TransportError::QueueFull { to })
    }

    /// The next frame received, with the voter that sent it (cancel-safe). Never resolves
    /// without a listener.
    fn recv(&self) -> LocalBoxFuture<(NodeId, Bytes)> {
        Box::pin(self.inbox.pop())
    }
}

async fn accept_loop(
    mut listener: Incoming,
    tls: Option<ListenerTls>,
    this: NodeId,
    inbox: FrameQueue,
    tasks: std::rc::Weak<RefCell<Tasks>>,
    forwarded: Option<ForwardedRequests>,
) {
    loop {
        let stream = match listener.accept().await {
            Ok(stream) => stream,
            Err(e) => {
                // Only the accept thread's end can fail: the listener was closed.
                tracing::info!(error = %e, "controller quorum: the listener is closed");
                return;
            }
        };
        let Some(tasks) = tasks.upgrade() else { return };
        let mut registry = tasks.borrow_mut();
        if registry.readers.len() >= INBOUND_CONNECTIONS_MAX {
            tracing::warn!(
                "controller quorum: {INBOUND_CONNECTIONS_MAX} connections are open; closing a new one"
            );
            continue;
        }
        let number = registry.next_reader;
        registry.next_reader += 1;
        let (inbox, weak) = (inbox.clone(), Rc::downgrade(&tasks));
        let (tls, forwarded) = (tls.clone(), forwarded.clone());
        let handle = crate::rt::spawn_local(async move {
            let peer = stream.peer_addr().ok();
            let on_hello = |from| {
                if let Some(tasks) = weak.upgrade() {
                    tasks.borrow_mut().hello(from, number);
                }
            };
            let admit = || {
                let handler = forwarded.as_ref()?;
                let room = weak.upgrade()?.borrow_mut().forwarding(number);
                room.then_some(handler)
            };
            let mut forwarder = ForwardingPeer {
                addr: peer,
                principal: None,
            };
            let read = match tls {
                None => read_connection(stream, this, &inbox, on_hello, admit, forwarder).await,
                Some(tls) => match tls.accept(stream).await {
                    Ok((stream, principal)) => {
                        forwarder.principal = principal;
                        read_connection(stream, this, &inbox, on_hello, admit, forwarder).await
                    }
                    Err(e) => Err(InboundError::Tls(e)),
                },
            };
            match read {
                Err(InboundError::Tls(e)) => tracing::warn!(
                    ?peer,
                    error = %e,
                    "controller quorum: TLS refused on an inbound connection (a voter with an \
                     untrusted certificate?); closed"
                ),
                Err(InboundError::NotAPeer(node)) => tracing::warn!(
                    ?peer,
                    node = node.0,
                    "controller quorum: a hello naming this node itself or a negative node id \
                     (two nodes with one node.id?); closed"
                ),
                Err(e) => {
                    tracing::debug!(?peer, error = %e, "controller quorum: closed an inbound connection")
                }
                Ok(()) => {}
            }
            if let Some(tasks) = weak.upgrade() {
                tasks.borrow_mut().ended(number);
            }
        })
        .detach();
        registry.readers.insert(number, handle);
    }
}

/// Why an inbound connection was closed.
#[derive(Debug, thiserror::Error)]
enum InboundError {
    #[error(transparent)]
    Wire(#[from] wire::WireError),
    #[error("no hello within {HELLO_TIMEOUT:?}")]
    HelloTimeout,
    #[error("node {0:?} cannot be a peer (this node, or a negative id)")]
    NotAPeer(NodeId),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsAcceptError),
    #[error("a forwarded request of {frame_bytes} bytes, outside 1..={max}")]
    ForwardedLength { frame_bytes: usize, max: usize },
    #[error("a forwarded request was not answered")]
    ForwardedUnanswered,
    #[error("no forwarded request within {FORWARDED_READ_TIMEOUT:?}")]
    ForwardedTimeout,
    #[error("a connection that is not a voter's, and no room or handler for forwarded requests")]
    ForwardedRefused,
}

/// Reads one inbound connection until it ends or misbehaves: a voter's (its hello, then
/// frames; `on_hello` learns the voter once its hello checked out), or a node's forwarded
/// requests when `admit` gives their handler (none: no handler, or no room).
async fn read_connection<'a, S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    this: NodeId,
    inbox: &FrameQueue,
    on_hello: impl FnOnce(NodeId),
    admit: impl FnOnce() -> Option<&'a ForwardedRequests>,
    forwarder: ForwardingPeer,
) -> Result<(), InboundError> {
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, stream);
    let mut hello = [0; wire::HELLO_BYTES];
    let first = future::or(
        async { Some(reader.read_exact(&mut hello[..4]).await) },
        async {
            crate::rt::sleep(HELLO_TIMEOUT).await;
            None
        },
    )
    .await;
    first
        .ok_or(InboundError::HelloTimeout)?
        .map_err(wire::WireError::Io)?;
    if hello[..4] != wire::HELLO_MAGIC {
        let forwarded = admit().ok_or(InboundError::ForwardedRefused)?;
        let first = [hello[0], hello[1], hello[2], hello[3]];
        return serve_forwarded(reader, first, forwarded, Rc::new(forwarder)).await;
    }
    let rest = future::or(
        async { Some(reader.read_exact(&mut hello[4..]).await) },
        async {
            crate::rt::sleep(HELLO_TIMEOUT).await;
            None
        },
    )
    .await;
    rest.ok_or(InboundError::HelloTimeout)?
        .map_err(wire::WireError::Io)?;
    let sender = wire::decode_hello(&hello)?;
    if sender == this || sender.0 < 0 {
        return Err(InboundError::NotAPeer(sender));
    }
    on_hello(sender);
    while let Some(frame) = wire::read_frame(&mut reader).await? {
        // Invariant 2: the newest frame is dropped when the queue is full.
        if inbox.push(sender, frame).is_err() {
            tracing::debug!(from = ?sender, "controller quorum: inbound queue full, dropped a frame");
        }
    }
    Ok(())
}

/// Answers the forwarded requests of one connection, in order; `first` is the first request's
/// length prefix, already read. Each request must arrive within [`FORWARDED_READ_TIMEOUT`].
async fn serve_forwarded<S: AsyncRead + AsyncWrite + Unpin>(
    mut reader: BufReader<S>,
    first: [u8; 4],
    forwarded: &ForwardedRequests,
    peer: Rc<ForwardingPeer>,
) -> Result<(), InboundError> {
    let mut prefix = Some(first);
    loop {
        let read = future::or(
            async { Some(read_forwarded(&mut reader, prefix.take(), forwarded).await) },
            async {
                crate::rt::sleep(FORWARDED_READ_TIMEOUT).await;
                None
            },
        )
        .await;
        let Some(frame) = read.ok_or(InboundError::ForwardedTimeout)?? else {
            return Ok(());
        };
        let reply = (forwarded.serve)(frame, peer.clone())
            .await
            .ok_or(InboundError::ForwardedUnanswered)?;
        let stream = reader.get_mut();
        stream
            .write_all(&reply)
            .await
            .map_err(wire::WireError::Io)?;
        stream.flush().await.map_err(wire::WireError::Io)?;
    }
}

/// One forwarded request frame (without its length prefix; `prefix` when already read);
/// `Ok(None)` at a clean end between requests. The buffer grows as bytes arrive, so a length
/// alone reserves nothing.
async fn read_forwarded<S: AsyncRead + Unpin>(
    reader: &mut BufReader<S>,
    prefix: Option<[u8; 4]>,
    forwarded: &ForwardedRequests,
) -> Result<Option<Bytes>, InboundError> {
    let prefix = match prefix {
        Some(prefix) => prefix,
        None => {
            let mut prefix = [0; 4];
            if reader
                .read(&mut prefix[..1])
                .await
                .map_err(wire::WireError::Io)?
                == 0
            {
                return Ok(None);
            }
            reader
                .read_exact(&mut prefix[1..])
                .await
                .map_err(wire::WireError::Io)?;
            prefix
        }
    };
    let frame_bytes = usize::try_from(u32::from_be_bytes(prefix)).unwrap_or(usize::MAX);
    if frame_bytes == 0 || frame_bytes > forwarded.frame_bytes_max {
        return Err(InboundError::ForwardedLength {
            frame_bytes,
            max: forwarded.frame_bytes_max,
        });
    }
    let mut frame = Vec::new();
    let limit = u64::try_from(frame_bytes).unwrap_or(u64::MAX);
    reader
        .take(limit)
        .read_to_end(&mut frame)
        .await
        .map_err(wire::WireError::Io)?;
    if frame.len() != frame_bytes {
        let torn = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "a torn request");
        return Err(wire::WireError::Io(torn).into());
    }
    Ok(Some(Bytes::from(frame)))
}

/// Drains `queue` into a connection to voter `to` at `addr`, reconnecting as needed.
async fn write_loop(
    this: NodeId,
    to: NodeId,
    addr: SocketAddr,
    queue: FrameQueue,
    security: PeerSecurity,
) {
    let mut backoff = RECONNECT_BACKOFF_MIN;
    // Said once per outage, when the backoff reaches its cap (about 2 s of failures).
    let mut warned = false;
    let mut connection: Option<BufWriter<PeerStream>> = None;
    loop {
        let (_, frame) = queue.pop().await;
        let writer = match connection.as_mut() {
            Some(writer) => writer,
            None => match connect(this, addr, &security).await {
                Ok(writer) => {
                    backoff = RECONNECT_BACKOFF_MIN;
                    if warned {
                        tracing::info!(?to, %addr, "controller quorum: voter reachable again");
                    }
                    warned = false;
                    connection.insert(writer)
                }
                Err(e) => {
                    tracing::debug!(?to, %addr, error = %e, "controller quorum: connecting failed");
                    if backoff == RECONNECT_BACKOFF_MAX && !warned {
                        warned = true;
                        tracing::warn!(?to, %addr, error = %e, "controller quorum: voter unreachable (check that it runs and that controller.quorum.voters names its address)");
                    }
                    // Invariant 4: what waited for this voter is stale by the next attempt.
                    queue.clear();
                    crate::rt::sleep(backoff).await;
                    backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
                    continue;
                }
            },
        };
        let written = future::or(write_queued(writer, frame, &queue), async {
            crate::rt::sleep(WRITE_TIMEOUT).await;
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("writing took longer than {WRITE_TIMEOUT:?}"),
            ))
        })
        .await;
        if let Err(e) = written {
            tracing::debug!(?to, %addr, error = %e, "controller quorum: writing failed, reconnecting");
            connection = None;
        }
    }
}

/// Opens a connection to `addr`, secures it with `security` and sends the hello naming
/// `this`.
async fn connect(
    this: NodeId,
    addr: SocketAddr,
    security: &PeerSecurity,
) -> std::io::Result<BufWriter<PeerStream>> {
    let stream = TcpStream::connect_timeout(addr, CONNECT_TIMEOUT)
        .await
        .map_err(std::io::Error::from)?;
    stream.set_nodelay(true).map_err(std::io::Error::from)?;
    let stream = security
        .secure(&addr.ip().to_string(), stream)
        .await
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::ConnectionRefused, e))?;
    let mut writer = BufWriter::with_capacity(WRITE_BUFFER_BYTES, stream);
    writer.write_all(&wire::encode_hello(this)).await?;
    Ok(writer)
}

/// Writes `first` and whatever else is queued, then flushes.
async fn write_queued(
    writer: &mut BufWriter<PeerStream>,
    first: Bytes,
    queue: &FrameQueue,
) -> std::io::Result<()> {
    let mut next = Some(first);
    while let Some(frame) = next {
        // `send` refused frames outside the bounds, so the prefix always encodes.
        let prefix = wire::encode_frame_length(frame.len())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        writer.write_all(&prefix).await?;
        writer.write_all(&frame).await?;
        next = if queue.is_empty() {
            None
        } else {
            future::poll_once(queue.pop()).await.map(|(_, frame)| frame)
        };
    }
    writer.flush().await
}
