//! The broker's own client connections to other nodes, secured as the listener they reach
//! asks: the replica fetcher, transaction markers and verification, and controller
//! forwarding connect to other brokers' inter-broker listener (`inter.broker.listener.name`,
//! [`PeerSecurity::inter_broker`]); the voters connect to each other on the controller
//! listener (`controller.listener.names`, [`PeerSecurity::controller`]).
//!
//! After the TCP connection (the caller's), [`PeerSecurity::secure`] runs the TLS client
//! handshake (`SSL`, `SASL_SSL`; `crate::tls::PeerTls`), then the SASL exchange (`SASL_*`):
//! SaslHandshake v1 naming `sasl.mechanism.inter.broker.protocol`, then SaslAuthenticate v2
//! with `PLAIN`'s token or SCRAM's two messages (`crate::sasl::ScramClient`; its key derivation
//! runs on the blocking pool). Everything is async on the shard; each response frame is bounded
//! by [`AUTH_FRAME_BYTES_MAX`] and the whole exchange by [`AUTH_TIMEOUT`].

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use net::kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use net::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tuning::config::{BrokerConfig, SecurityProtocol};

use crate::rt::TcpStream;
use crate::sasl::{SaslConfigError, SaslCredentials, ScramClient};
use crate::tls::{PeerTls, PeerTlsStream, TlsConfigError};

/// Largest SASL response frame accepted from a peer, bytes (a SCRAM message is a few hundred).
pub const AUTH_FRAME_BYTES_MAX: usize = 64 << 10;
/// Longest the SASL exchange with a peer may take (the key derivation included).
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(15);
/// The client id of the SASL requests.
const CLIENT_ID: &str = "sluice-broker";
/// SaslHandshake version sent (v1: the tokens then travel in SaslAuthenticate).
const SASL_HANDSHAKE_VERSION: i16 = 1;
/// SaslAuthenticate version sent.
const SASL_AUTHENTICATE_VERSION: i16 = 2;

/// Why the security of a peer listener cannot be set up (the broker does not start).
#[derive(Debug, thiserror::Error)]
pub enum PeerConfigError {
    #[error(transparent)]
    Tls(#[from] TlsConfigError),
    #[error(transparent)]
    Sasl(#[from] SaslConfigError),
}

/// Why a connection to a peer could not be secured (it is closed).
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The TLS handshake failed (the peer's certificate is not trusted or does not name its
    /// host, the peer refused our certificate) or timed out.
    #[error("TLS with {host}: {source}")]
    Tls {
        host: String,
        source: std::io::Error,
    },
    /// Reading or writing the SASL exchange failed.
    #[error("SASL with {host}: {source}")]
    Io {
        host: String,
        source: std::io::Error,
    },
    /// The peer refused the mechanism or the credentials, or answered nonsense.
    #[error("SASL with {host}: {reason}")]
    Authentication { host: String, reason: String },
}

/// A connection to a peer: plaintext, or TLS over TCP.
pub enum PeerStream {
    Plain(TcpStream),
    Tls(Box<PeerTlsStream<TcpStream>>),
}

impl AsyncRead for PeerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_flush(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_close(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

/// How this broker secures its connections to one listener of other nodes: shared by every
/// shard (immutable once built).
#[derive(Clone, Debug, Default)]
pub struct PeerSecurity {
    /// The TLS client side (`SSL`, `SASL_SSL`).
    tls: Option<PeerTls>,
    /// The credentials presented (`SASL_PLAINTEXT`, `SASL_SSL`).
    sasl: Option<Arc<SaslCredentials>>,
}

impl PeerSecurity {
    /// For other brokers' inter-broker listener (`inter.broker.listener.name` or
    /// `security.inter.broker.protocol`). Blocking (reads key files): call at start-up.
    ///
    /// # Errors
    /// [`PeerConfigError`] naming the key at fault.
    pub fn inter_broker(config: &BrokerConfig) -> Result<PeerSecurity, PeerConfigError> {
        let listener = config.inter_broker_listener_name();
        PeerSecurity::for_listener(config, &listener, config.inter_broker_protocol())
    }

    /// For the other voters' controller listener (the first of `controller.listener.names`;
    /// plaintext without one). Blocking (reads key files): call at start-up.
    ///
    /// # Errors
    /// [`PeerConfigError`] naming the key at fault.
    pub fn controller(config: &BrokerConfig) -> Result<PeerSecurity, PeerConfigError> {
        match config.controller_listener() {
            Some((listener, protocol)) => PeerSecurity::for_listener(config, listener, protocol),
            None => Ok(PeerSecurity::default()),
        }
    }

    fn for_listener(
        config: &BrokerConfig,
        listener: &str,
        protocol: SecurityProtocol,
    ) -> Result<PeerSecurity, PeerConfigError> {
        let tls = if protocol.uses_tls() {
            Some(PeerTls::new(config, listener)?)
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            Some(Arc::new(SaslCredentials::inter_broker(config, listener)?))
        } else {
            None
        };
        Ok(PeerSecurity { tls, sasl })
    }

    /// Secures `stream`, a new connection to `host` (the name or IP literal the peer is
    /// registered under, checked against its certificate): TLS, then SASL, as configured.
    ///
    /// # Errors
    /// [`PeerError`]: the connection must be dropped.
    pub async fn secure(&self, host: &str, stream: TcpStream) -> Result<PeerStream, PeerError> {
        let mut stream = match &self.tls {
            None => PeerStream::Plain(stream),
            Some(tls) => {
                let stream = tls
                    .connect(host, stream)
                    .await
                    .map_err(|source| PeerError::Tls {
                        host: host.to_owned(),
                        source,
                    })?;
                PeerStream::Tls(Box::new(stream))
            }
        };
        if let Some(credentials) = &self.sasl {
            let exchange = async { Some(authenticate(&mut stream, host, credentials).await) };
            let timeout = async {
                crate::rt::sleep(AUTH_TIMEOUT).await;
                None
            };
            futures_lite::future::or(exchange, timeout)
                .await
                .unwrap_or_else(|| {
                    Err(PeerError::Authentication {
                        host: host.to_owned(),
                        reason: format!("not done within {AUTH_TIMEOUT:?}"),
                    })
                })?;
        }
        Ok(stream)
    }
}

/// The SASL exchange of `credentials` on `stream` (see the module docs).
async fn authenticate(
    stream: &mut PeerStream,
    host: &str,
    credentials: &SaslCredentials,
) -> Result<(), PeerError> {
    let refused = |reason: String| PeerError::Authentication {
        host: host.to_owned(),
        reason,
    };
    let handshake = SaslHandshakeRequest::default()
        .with_mechanism(StrBytes::from_string(credentials.mechanism.clone()));
    let answer: SaslHandshakeResponse = exchange(
        stream,
        host,
        ApiKey::SaslHandshake,
        SASL_HANDSHAKE_VERSION,
        1,
        &handshake,
    )
    .await?;
    if answer.error_code != 0 {
        let offered: Vec<String> = answer.mechanisms.iter().map(ToString::to_string).collect();
        return Err(refused(format!(
            "mechanism {} refused (error {}); the listener offers {}",
            credentials.mechanism,
            answer.error_code,
            offered.join(",")
        )));
    }
    if credentials.mechanism == "PLAIN" {
        authenticate_once(stream, host, 2, credentials.plain_token()).await?;
        return Ok(());
    }
    let nonce = crate::sasl::server_nonce()
        .map_err(|e| refused(format!("no randomness for a SCRAM nonce: {e}")))?;
    let mut scram = ScramClient::new(credentials, nonce)
        .ok_or_else(|| refused(format!("mechanism {} unsupported", credentials.mechanism)))?;
    let server_first = authenticate_once(stream, host, 2, scram.client_first()).await?;
    let (scram_back, client_final) = crate::rt::spawn_blocking(move || {
        let client_final = scram.client_final(&server_first);
        (scram, client_final)
    })
    .await;
    scram = scram_back;
    let client_final = client_final.map_err(|e| refused(e.to_string()))?;
    let server_final = authenticate_once(stream, host, 3, client_final).await?;
    scram
        .check_server_final(&server_final)
        .map_err(|e| refused(e.to_string()))
}

/// One SaslAuthenticate round trip with `token`; the server's token back.
async fn authenticate_once(
    stream: &mut PeerStream,
    host: &str,
    correlation_id: i32,
    token: Vec<u8>,
) -> Result<Bytes, PeerError> {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    let answer: SaslAuthenticateResponse = exchange(
        stream,
        host,
        ApiKey::SaslAuthenticate,
        SASL_AUTHENTICATE_VERSION,
        correlation_id,
        &request,
    )
    .await?;
    if answer.error_code != 0 {
        return Err(PeerError::Authentication {
            host: host.to_owned(),
            reason: format!(
                "error {}: {}",
                answer.error_code,
                answer.error_message.as_deref().unwrap_or("")
            ),
        });
    }
    Ok(answer.auth_bytes)
}

/// The size-prefixed frame of `request` as client `client_id` sends it to another node: a
/// request header (`api_key` at `version`, `correlation_id`), then the request.
///
/// # Errors
/// Why the codec refused the header or the request, or that the frame exceeds 4 GiB.
pub(crate) fn frame_request<Q: Encodable>(
    client_id: &'static str,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    request: &Q,
) -> Result<Bytes, String> {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(client_id)));
    let mut buf = BytesMut::new();
    buf.put_u32(0);
    header
        .encode(&mut buf, api_key.request_header_version(version))
        .map_err(|e| e.to_string())?;
    request
        .encode(&mut buf, version)
        .map_err(|e| e.to_string())?;
    let size = u32::try_from(buf.len() - 4).map_err(|_| format!("a {}-byte request", buf.len()))?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// Sends `request` (`api_key` at `version`) and decodes its response.
async fn exchange<Q: Encodable, R: Decodable>(
    stream: &mut PeerStream,
    host: &str,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    request: &Q,
) -> Result<R, PeerError> {
    let io = |source| PeerError::Io {
        host: host.to_owned(),
        source,
    };
    let malformed = |reason: String| PeerError::Authentication {
        host: host.to_owned(),
        reason: format!("{api_key:?}: {reason}"),
    };
    let buf =
        frame_request(CLIENT_ID, api_key, version, correlation_id, request).map_err(malformed)?;
    stream.write_all(&buf).await.map_err(io)?;
    stream.flush().await.map_err(io)?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).await.map_err(io)?;
    let size_bytes = usize::try_from(u32::from_be_bytes(size)).unwrap_or(usize::MAX);
    if size_bytes > AUTH_FRAME_BYTES_MAX {
        return Err(malformed(format!("a {size_bytes}-byte response")));
    }
    let mut body = vec![0u8; size_bytes];
    stream.read_exact(&mut body).await.map_err(io)?;
    let mut body = Bytes::from(body);
    let header = ResponseHeader::decode(&mut body, api_key.response_header_version(version))
        .map_err(|e| malformed(e.to_string()))?;
    if header.correlation_id != correlation_id {
        return Err(malformed(format!(
            "correlation id {}, not {correlation_id}",
            header.correlation_id
        )));
    }
    let response = R::decode(&mut body, version).map_err(|e| malformed(e.to_string()))?;
    if body.has_remaining() {
        return Err(malformed(format!(
            "{} bytes after the response",
            body.remaining()
        )));
    }
    Ok(response)
}
