//! SASL authentication on `SASL_PLAINTEXT` and `SASL_SSL` listeners (KIP-43, KIP-152), as
//! Kafka's `SaslServerAuthenticator`: a state machine free of I/O, one per connection, fed the
//! connection's frames until the client is authenticated.
//!
//! 1. Handshake: ApiVersions is served as usual; SaslHandshake (17) names a mechanism. One
//!    this listener serves is accepted; any other (Kafka's default `GSSAPI`, one not in
//!    `sasl.enabled.mechanisms`) is answered UNSUPPORTED_SASL_MECHANISM with the served list,
//!    and the connection closed.
//! 2. Authenticate: SaslAuthenticate (36) carries the client's tokens (after a v0 handshake a
//!    token comes as a bare size-prefixed frame, and so does the answer). `PLAIN` (RFC 4616)
//!    checks the user and password against the listener's `PlainLoginModule` users
//!    (`user_<name>="<password>"`), comparing in constant time. `SCRAM-SHA-256` and
//!    `SCRAM-SHA-512` (RFC 5802, RFC 7677; `scram`) take two tokens, checked against the
//!    credentials in the metadata image (AlterUserScramCredentials sets them).
//!    `OAUTHBEARER` (RFC 7628, KIP-255; `oauthbearer`) takes a token, checked by Kafka's
//!    unsecured-JWS validator or against a JWKS. Success names the principal `User:<name>`;
//!    failure is answered SASL_AUTHENTICATION_FAILED (58) with Kafka's message after
//!    `connection.failed.authentication.delay.ms`, then the connection closes.
//!
//! Any other request before authentication closes the connection unanswered (Kafka's
//! IllegalSaslStateException), as does a frame that does not decode. After authentication
//! the connection serves requests; SaslHandshake and SaslAuthenticate then answer
//! ILLEGAL_SASL_STATE (the handlers do that) — unless the session has a lifetime.
//!
//! Re-authentication (KIP-368, as Kafka's `SaslServerAuthenticator` and `KafkaChannel`): a
//! session has a lifetime when `connections.max.reauth.ms` (per listener, per mechanism) is
//! positive, or when its credential expires (an OAUTHBEARER token's `exp`): the lesser of the
//! two, sent as SaslAuthenticate's `session_lifetime_ms`. Within it, a SaslHandshake starts a
//! re-authentication on the open connection (at most one a second; earlier responses still
//! go out in order), with the same mechanism and ending in the same principal, else it fails
//! as Kafka fails it. A request that arrives after the session expired closes the connection
//! (Kafka's "expired" close).

mod client;
mod error;
mod jaas;
mod oauthbearer;
mod scram;

pub use error::SaslConfigError;
use error::UNSECURED_HANDLER_CLASS;
use jaas::{PLAIN, PLAIN_LOGIN_MODULE};

pub use client::{SaslCredentials, ScramClient};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::{
    ApiKey, RequestKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use net::kafka_protocol::protocol::{Encodable, StrBytes};
use net::ApiVersionTable;
use oauthbearer::{
    OAuthExchange, OAuthFailure, OAuthStep, UnsecuredOptions, Validator, OAUTHBEARER,
};
use replication::metadata::scram::{ScramCredentials, ScramMechanism};
use scram::{ScramExchange, ScramStep};
use subtle::ConstantTimeEq;
use tuning::config::BrokerConfig;

/// The mechanisms Sluice serves.
pub const SERVED_MECHANISMS: &[&str] = &[PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512", OAUTHBEARER];

/// Kafka's default `sasl.enabled.mechanisms`.
const DEFAULT_ENABLED_MECHANISMS: &str = "GSSAPI";

/// Length of a SCRAM server nonce, characters (URL-safe base64 of 18 random bytes: 144 bits;
/// Kafka's `ScramFormatter.secureRandomString` draws 130).
const SERVER_NONCE_BYTES: usize = 18;

/// Longest SASL token accepted, bytes (a PLAIN token is three short strings; Kafka bounds
/// tokens by `sasl.server.max.receive.size`, default 524288).
const TOKEN_MAX_BYTES: usize = 524_288;

/// Least time between the starts of two re-authentications of a connection (Kafka's
/// `KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS`): a SaslHandshake sooner is served as
/// any request (ILLEGAL_SASL_STATE).
const REAUTH_INTERVAL_MIN: Duration = Duration::from_secs(1);

/// The JWKS validator's handler under its deprecated package (Kafka still accepts it).
const JWKS_HANDLER_CLASS_DEPRECATED: &str =
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler";

/// Largest frame read from a client before it is authenticated, bytes (Kafka's
/// `sasl.server.max.receive.size` default): a bigger one closes the connection.
pub const UNAUTHENTICATED_FRAME_MAX_BYTES: usize = TOKEN_MAX_BYTES;

/// A SASL listener's settings, shared by its connections.
#[derive(Debug)]
pub struct SaslListener {
    /// The enabled mechanisms Sluice serves, upper case.
    mechanisms: Vec<String>,
    /// `PLAIN`'s users and their passwords.
    plain_users: BTreeMap<String, String>,
    /// `OAUTHBEARER`'s validator, when it is enabled.
    oauth: Option<Validator>,
    /// `connections.max.reauth.ms` per enabled mechanism (0: no limit).
    max_reauth_ms: BTreeMap<String, i64>,
}

impl SaslListener {
    /// Listener `listener`'s SASL settings from `config`.
    ///
    /// # Errors
    /// [`SaslConfigError`] naming the key at fault.
    pub fn new(config: &BrokerConfig, listener: &str) -> Result<SaslListener, SaslConfigError> {
        let enabled = config
            .listener_property(listener, "sasl.enabled.mechanisms")
            .unwrap_or(DEFAULT_ENABLED_MECHANISMS);
        let mechanisms: Vec<String> = enabled
            .split(',')
            .map(|m| m.trim().to_ascii_uppercase())
            .filter(|m| SERVED_MECHANISMS.contains(&m.as_str()))
            .collect();
        if mechanisms.is_empty() {
            return Err(SaslConfigError::NoServedMechanism {
                listener: listener.to_owned(),
                enabled: enabled.to_owned(),
                served: SERVED_MECHANISMS.join(","),
            });
        }
        let plain_users = if mechanisms.iter().any(|m| m == PLAIN) {
            plain_users(config, listener)?
        } else {
            BTreeMap::new()
        };
        let oauth = if mechanisms.iter().any(|m| m == OAUTHBEARER) {
            Some(oauth_validator(config, listener)?)
        } else {
            None
        };
        let max_reauth_ms = mechanisms
            .iter()
            .map(|m| {
                let per_mechanism = format!("{}.connections.max.reauth.ms", m.to_ascii_lowercase());
                let ms = config
                    .listener_property(listener, &per_mechanism)
                    .or_else(|| config.listener_property(listener, "connections.max.reauth.ms"))
                    .and_then(|v| v.trim().parse::<i64>().ok())
                    .unwrap_or(0);
                (m.clone(), ms)
            })
            .collect();
        Ok(SaslListener {
            mechanisms,
            plain_users,
            oauth,
            max_reauth_ms,
        })
    }

    /// The user `PLAIN` authenticates for `token` (RFC 4616: `[authzid] NUL authcid NUL
    /// passwd`).
    ///
    /// # Errors
    /// Kafka's message for the client (SASL_AUTHENTICATION_FAILED).
    fn authenticate_plain(&self, token: &[u8]) -> Result<String, &'static str> {
        let parts: Vec<&[u8]> = token.split(|&b| b == 0).collect();
        let [authzid, user, password] = parts[..] else {
            return Err("Invalid SASL/PLAIN response: expected 3 tokens");
        };
        let user = std::str::from_utf8(user).map_err(|_| "Invalid SASL/PLAIN response")?;
        if user.is_empty() {
            return Err("Authentication failed: username not specified");
        }
        if password.is_empty() {
            return Err("Authentication failed: password not specified");
        }
        if !authzid.is_empty() && authzid != user.as_bytes() {
            return Err(
                "Authentication failed: Client requested an authorization id that is different from username",
            );
        }
        let expected = self.plain_users.get(user).map(String::as_bytes);
        // Compare against something even for an unknown user, so that both take as long.
        let matches = expected.unwrap_or(b"").ct_eq(password);
        if expected.is_some() && bool::from(matches) {
            Ok(user.to_owned())
        } else {
            Err("Authentication failed: Invalid username or password")
        }
    }
}

/// `PLAIN`'s users on `listener`: the `user_<name>="<password>"` options of its
/// `PlainLoginModule` entry (`listener.name.<l>.plain.sasl.jaas.config`, else
/// `sasl.jaas.config`).
///
/// # Errors
/// [`SaslConfigError`] naming the key at fault.
fn plain_users(
    config: &BrokerConfig,
    listener: &str,
) -> Result<BTreeMap<String, String>, SaslConfigError> {
    let (_, options) =
        jaas::listener_options(config, listener, PLAIN, PLAIN_LOGIN_MODULE, |key| {
            SaslConfigError::NoJaasConfig {
                listener: listener.to_owned(),
                mechanism: PLAIN.to_owned(),
                key,
            }
        })?;
    Ok(options
        .into_iter()
        .filter_map(|(k, v)| k.strip_prefix("user_").map(|u| (u.to_owned(), v)))
        .collect())
}

/// `OAUTHBEARER`'s validator on `listener`: the JWKS one when
/// `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class` names it, else the
/// unsecured-JWS one with the options of the listener's `OAuthBearerLoginModule` entry.
///
/// # Errors
/// [`SaslConfigError`] naming the key at fault.
fn oauth_validator(config: &BrokerConfig, listener: &str) -> Result<Validator, SaslConfigError> {
    let (_, options) = jaas::listener_options(
        config,
        listener,
        OAUTHBEARER,
        oauthbearer::LOGIN_MODULE,
        |key| SaslConfigError::NoJaasConfig {
            listener: listener.to_owned(),
            mechanism: OAUTHBEARER.to_owned(),
            key,
        },
    )?;
    let handler_key = "oauthbearer.sasl.server.callback.handler.class";
    match config
        .listener_property(listener, handler_key)
        .map(str::trim)
    {
        None | Some(UNSECURED_HANDLER_CLASS) => UnsecuredOptions::from_jaas(&options)
            .map(Validator::Unsecured)
            .map_err(|why| SaslConfigError::BadJaasConfig {
                key: format!(
                    "listener.name.{}.oauthbearer.sasl.jaas.config",
                    listener.to_ascii_lowercase()
                ),
                why,
            }),
        Some(oauthbearer::JWKS_HANDLER_CLASS | JWKS_HANDLER_CLASS_DEPRECATED) => Ok(
            Validator::Jwks(oauthbearer::JwksValidator::new(config, listener)?),
        ),
        Some(class) => Err(SaslConfigError::UnknownCallbackHandler {
            key: format!(
                "listener.name.{}.{handler_key}",
                listener.to_ascii_lowercase()
            ),
            class: class.to_owned(),
        }),
    }
}

/// A SCRAM server nonce from the OS's secure random source: printable, without commas.
///
/// # Errors
/// The OS's error when it has no randomness to give.
pub fn server_nonce() -> Result<String, getrandom::Error> {
    use base64::Engine;
    let mut bytes = [0u8; SERVER_NONCE_BYTES];
    getrandom::getrandom(&mut bytes)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The time an authentication step happens at.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    /// Monotonic time: session expiry, the re-authentication interval.
    pub instant: Instant,
    /// Wall-clock time, ms since the Unix epoch: token expiry and issue times.
    pub unix_ms: i64,
}

impl Now {
    /// The system's clocks now.
    pub fn system() -> Now {
        let unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Now {
            instant: Instant::now(),
            unix_ms,
        }
    }
}

/// A session's lifetime, ms (KIP-368, Kafka's `calcCompletionTimesAndReturnSessionLifetimeMs`):
/// the time to the credential's expiry (`credential_expiry_unix_ms`, an OAUTHBEARER token's),
/// at most `max_reauth_ms` when that is positive, never negative; `None`: the session does not
/// expire.
pub fn session_lifetime_ms(
    credential_expiry_unix_ms: Option<i64>,
    max_reauth_ms: i64,
    now_unix_ms: i64,
) -> Option<i64> {
    let to_expiry = credential_expiry_unix_ms.map(|e| e.saturating_sub(now_unix_ms));
    let lifetime = match (to_expiry, max_reauth_ms > 0) {
        (None, false) => return None,
        (None, true) => max_reauth_ms,
        (Some(left), false) => left,
        (Some(left), true) => left.min(max_reauth_ms),
    };
    Some(lifetime.max(0))
}

/// What the connection does with a frame (see [`SaslServer::on_frame`]).
#[derive(Debug)]
pub enum Step {
    /// Not the authenticator's (ApiVersions during the handshake): serve it as usual.
    Serve,
    /// Send this response frame and read on.
    Answer(Bytes),
    /// Authenticated (or re-authenticated) as `principal` (`User:<name>`): send this response
    /// frame, then serve requests.
    Authenticated { answer: Bytes, principal: String },
    /// Send this response frame, then close; `delayed`: an authentication failure, held back
    /// `connection.failed.authentication.delay.ms`.
    AnswerThenClose { answer: Bytes, delayed: bool },
    /// Close without an answer.
    Close,
}

/// What an authenticated connection does with a request frame (see
/// [`SaslServer::on_authenticated_frame`]).
#[derive(Debug, PartialEq, Eq)]
pub enum SessionStep {
    /// Serve the request.
    Serve,
    /// A re-authentication starts: give this frame (its SaslHandshake) to
    /// [`SaslServer::on_frame`], and the frames after it until it ends.
    Reauthenticate,
    /// The session expired without re-authentication: close the connection.
    Expired,
}

/// The mechanism a connection authenticates with, and where its exchange stands.
#[derive(Debug)]
enum Exchange {
    Plain,
    Scram(ScramExchange),
    OAuthBearer(OAuthExchange),
}

/// What a client token leads to.
enum TokenStep {
    /// Send this challenge and wait for the next token.
    Challenge(Vec<u8>),
    /// Authenticated as `user`: send `reply` (empty for PLAIN and OAUTHBEARER);
    /// `credential_expiry_unix_ms`: when the credential expires (an OAUTHBEARER token's).
    Done {
        user: String,
        reply: Vec<u8>,
        credential_expiry_unix_ms: Option<i64>,
    },
}

/// An authenticated session.
#[derive(Debug, Clone)]
struct Session {
    /// The mechanism it authenticated with.
    mechanism: String,
    /// `User:<name>`.
    principal: String,
    /// When it expires; `None`: never (no re-authentication then).
    expires: Option<Instant>,
}

#[derive(Debug)]
enum State {
    Handshake,
    /// After a SaslHandshake; `raw`: a v0 one, whose tokens come unwrapped.
    Authenticate {
        raw: bool,
        mechanism: String,
        exchange: Exchange,
    },
    /// Re-authentication's handshake named another mechanism than the session's: the next
    /// frame fails it.
    BadMechanism,
    /// Authenticated.
    Authenticated(Session),
}

/// One connection's authenticator.
#[derive(Debug)]
pub struct SaslServer {
    listener: Arc<SaslListener>,
    state: State,
    /// The server nonce of a SCRAM exchange (taken by the first one; renewed for each
    /// re-authentication).
    server_nonce: Option<String>,
    /// The session being re-authenticated (its mechanism and principal must not change).
    previous: Option<Session>,
    /// When the last re-authentication started.
    reauth_started: Option<Instant>,
}

impl SaslServer {
    /// A connection's authenticator on `listener`, before the handshake; `server_nonce`: the
    /// nonce a SCRAM exchange answers with ([`server_nonce`]).
    pub fn new(listener: Arc<SaslListener>, server_nonce: String) -> SaslServer {
        SaslServer {
            listener,
            state: State::Handshake,
            server_nonce: Some(server_nonce),
            previous: None,
            reauth_started: None,
        }
    }

    /// Whether the client is authenticated (and not re-authenticating).
    pub fn is_authenticated(&self) -> bool {
        matches!(self.state, State::Authenticated(_))
    }

    /// A request frame of an authenticated client, at `now`: a SaslHandshake within a session
    /// that has a lifetime (and at least [`REAUTH_INTERVAL_MIN`] after the last one) starts a
    /// re-authentication, SCRAM answering with `nonce` (called only then); any request after
    /// the session expired closes the connection.
    pub fn on_authenticated_frame(
        &mut self,
        frame: &[u8],
        now: Instant,
        nonce: impl FnOnce() -> Option<String>,
    ) -> SessionStep {
        let State::Authenticated(session) = &self.state else {
            return SessionStep::Serve;
        };
        let Some(expires) = session.expires else {
            return SessionStep::Serve;
        };
        let key = frame.first_chunk::<2>().map(|k| i16::from_be_bytes(*k));
        let soon = self
            .reauth_started
            .is_some_and(|t| now.saturating_duration_since(t) < REAUTH_INTERVAL_MIN);
        if key == Some(ApiKey::SaslHandshake as i16) && !soon {
            if let Some(nonce) = nonce() {
                self.previous = Some(session.clone());
                self.reauth_started = Some(now);
                self.server_nonce = Some(nonce);
                self.state = State::Handshake;
                return SessionStep::Reauthenticate;
            }
        }
        if now > expires {
            return SessionStep::Expired;
        }
        SessionStep::Serve
    }

    /// "authentication" or "re-authentication", as Kafka's messages say.
    fn what(&self) -> &'static str {
        if self.previous.is_some() {
            "re-authentication"
        } else {
            "authentication"
        }
    }

    /// The next frame from the client (`versions`: the broker's ApiVersions table;
    /// `credentials`: the SCRAM credentials of the broker's metadata image), at `now`.
    pub fn on_frame(
        &mut self,
        frame: Bytes,
        versions: &ApiVersionTable,
        credentials: &ScramCredentials,
        now: Now,
    ) -> Step {
        match self.state {
            State::Authenticate { raw: true, .. } => {
                return self.raw_token(&frame, credentials, now)
            }
            State::BadMechanism | State::Authenticated(_) => return Step::Close,
            State::Handshake | State::Authenticate { .. } => {}
        }
        let key = frame.first_chunk::<2>().map(|k| i16::from_be_bytes(*k));
        if matches!(self.state, State::Handshake) && key == Some(ApiKey::ApiVersions as i16) {
            // Kafka serves ApiVersions before the first authentication only.
            return if self.previous.is_some() {
                Step::Close
            } else {
                Step::Serve
            };
        }
        let Ok(request) = net::decode_request(frame, versions) else {
            return Step::Close;
        };
        let (version, correlation_id) = (request.api_version, request.correlation_id());
        match (&self.state, request.body) {
            (State::Handshake, RequestKind::SaslHandshake(req)) => {
                self.handshake(req.mechanism.to_string(), version, correlation_id)
            }
            (State::Authenticate { .. }, RequestKind::SaslAuthenticate(req)) => {
                let outcome = self.check_token(&req.auth_bytes, credentials, now);
                let mut response = SaslAuthenticateResponse::default();
                match &outcome {
                    Ok(TokenStep::Challenge(bytes) | TokenStep::Done { reply: bytes, .. }) => {
                        response.auth_bytes = Bytes::copy_from_slice(bytes);
                    }
                    Err(message) => {
                        response.error_code = ResponseError::SaslAuthenticationFailed.code();
                        response.error_message = Some(StrBytes::from_string(message.clone()));
                    }
                }
                let done = match outcome {
                    Ok(TokenStep::Done {
                        user,
                        credential_expiry_unix_ms,
                        ..
                    }) => Some(self.complete(&user, credential_expiry_unix_ms, now)),
                    _ => None,
                };
                if let Some(Ok((_, Some(lifetime_ms)))) = &done {
                    // The field exists from v1 (KIP-368).
                    if version >= 1 {
                        response.session_lifetime_ms = *lifetime_ms;
                    }
                }
                if let Some(Err(message)) = &done {
                    response.error_code = ResponseError::SaslAuthenticationFailed.code();
                    response.error_message = Some(StrBytes::from_string(message.clone()));
                }
                let Some(answer) =
                    encode(ApiKey::SaslAuthenticate, version, correlation_id, &response)
                else {
                    return Step::Close;
                };
                match (response.error_code, done) {
                    (0, Some(Ok((principal, _)))) => Step::Authenticated { answer, principal },
                    (0, _) => Step::Answer(answer),
                    _ => Step::AnswerThenClose {
                        answer,
                        delayed: true,
                    },
                }
            }
            _ => Step::Close,
        }
    }

    /// A SaslHandshake naming `mechanism`.
    fn handshake(&mut self, mechanism: String, version: i16, correlation_id: i32) -> Step {
        let served = self.listener.mechanisms.contains(&mechanism);
        let mut response = SaslHandshakeResponse::default();
        response.mechanisms = self
            .listener
            .mechanisms
            .iter()
            .map(|m| StrBytes::from_string(m.clone()))
            .collect();
        if !served {
            response.error_code = ResponseError::UnsupportedSaslMechanism.code();
        }
        let Some(answer) = encode(ApiKey::SaslHandshake, version, correlation_id, &response) else {
            return Step::Close;
        };
        if !served {
            return Step::AnswerThenClose {
                answer,
                delayed: false,
            };
        }
        if let Some(previous) = &self.previous {
            if previous.mechanism != mechanism {
                tracing::debug!(
                    "SASL mechanism '{mechanism}' requested by client is not supported for \
                     re-authentication of mechanism '{}'",
                    previous.mechanism
                );
                self.state = State::BadMechanism;
                return Step::Answer(answer);
            }
        }
        let exchange = if mechanism == PLAIN {
            Exchange::Plain
        } else if mechanism == OAUTHBEARER {
            Exchange::OAuthBearer(OAuthExchange::default())
        } else if let Some(m) = ScramMechanism::from_name(&mechanism) {
            let Some(nonce) = self.server_nonce.take() else {
                return Step::Close;
            };
            Exchange::Scram(ScramExchange::new(m, nonce))
        } else {
            return Step::Close;
        };
        self.state = State::Authenticate {
            raw: version == 0,
            mechanism,
            exchange,
        };
        Step::Answer(answer)
    }

    /// The exchange succeeded for `user`: the session starts (its principal and lifetime, ms),
    /// unless a re-authentication changed the principal.
    ///
    /// # Errors
    /// Kafka's message for a changed principal (SASL_AUTHENTICATION_FAILED).
    fn complete(
        &mut self,
        user: &str,
        credential_expiry_unix_ms: Option<i64>,
        now: Now,
    ) -> Result<(String, Option<i64>), String> {
        let principal = format!("User:{user}");
        if let Some(previous) = &self.previous {
            if previous.principal != principal {
                let (from, to) = (
                    previous.principal.replacen(':', ".", 1),
                    principal.replacen(':', ".", 1),
                );
                return Err(format!(
                    "Cannot change principals during re-authentication from {from}: {to}"
                ));
            }
        }
        let State::Authenticate { mechanism, .. } = &self.state else {
            return Err("Unexpected SASL token before the handshake".to_owned());
        };
        let mechanism = mechanism.clone();
        let max_reauth_ms = self
            .listener
            .max_reauth_ms
            .get(&mechanism)
            .copied()
            .unwrap_or(0);
        let lifetime_ms =
            session_lifetime_ms(credential_expiry_unix_ms, max_reauth_ms, now.unix_ms);
        let expires = lifetime_ms
            .map(|ms| now.instant + Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
        self.state = State::Authenticated(Session {
            mechanism,
            principal: principal.clone(),
            expires,
        });
        self.previous = None;
        Ok((principal, lifetime_ms))
    }

    /// A token after a v0 handshake: answered with a bare size-prefixed frame (a challenge,
    /// or the final reply: empty for PLAIN); a failure closes the connection, as Kafka's v0
    /// flow does.
    fn raw_token(&mut self, token: &[u8], credentials: &ScramCredentials, now: Now) -> Step {
        let framed = |bytes: &[u8]| {
            let mut out = Vec::with_capacity(4 + bytes.len());
            // A reply is at most a SCRAM message of a few hundred bytes.
            let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(bytes);
            Bytes::from(out)
        };
        match self.check_token(token, credentials, now) {
            Ok(TokenStep::Challenge(bytes)) => Step::Answer(framed(&bytes)),
            Ok(TokenStep::Done {
                user,
                reply,
                credential_expiry_unix_ms,
            }) => match self.complete(&user, credential_expiry_unix_ms, now) {
                Ok((principal, _)) => Step::Authenticated {
                    answer: framed(&reply),
                    principal,
                },
                Err(_) => Step::Close,
            },
            Err(_) => Step::Close,
        }
    }

    /// The client's next token for the connection's mechanism.
    ///
    /// # Errors
    /// Kafka's message for the client (SASL_AUTHENTICATION_FAILED).
    fn check_token(
        &mut self,
        token: &[u8],
        credentials: &ScramCredentials,
        now: Now,
    ) -> Result<TokenStep, String> {
        if token.len() > TOKEN_MAX_BYTES {
            return Err("Authentication failed: token too large".to_owned());
        }
        let what = self.what();
        let State::Authenticate { exchange, .. } = &mut self.state else {
            return Err("Unexpected SASL token before the handshake".to_owned());
        };
        match exchange {
            Exchange::Plain => self
                .listener
                .authenticate_plain(token)
                .map(|user| TokenStep::Done {
                    user,
                    reply: Vec::new(),
                    credential_expiry_unix_ms: None,
                })
                .map_err(str::to_owned),
            Exchange::Scram(x) => match x.evaluate(token, credentials) {
                Ok(ScramStep::Challenge(c)) => Ok(TokenStep::Challenge(c)),
                Ok(ScramStep::Done { user, reply }) => Ok(TokenStep::Done {
                    user,
                    reply,
                    credential_expiry_unix_ms: None,
                }),
                Err(failure) => Err(failure.0),
            },
            Exchange::OAuthBearer(x) => {
                let Some(validator) = self.listener.oauth.as_ref() else {
                    return Err("OAUTHBEARER is not configured".to_owned());
                };
                match x.evaluate(token, validator, now.unix_ms) {
                    Ok(OAuthStep::Challenge(c)) => Ok(TokenStep::Challenge(c.into_bytes())),
                    Ok(OAuthStep::Done(t)) => Ok(TokenStep::Done {
                        user: t.principal,
                        reply: Vec::new(),
                        credential_expiry_unix_ms: Some(t.expiry_unix_ms),
                    }),
                    Err(OAuthFailure::Authentication(message)) => Err(message),
                    Err(OAuthFailure::Malformed(why)) => {
                        tracing::debug!(why, "OAUTHBEARER message refused");
                        Err(format!(
                            "Authentication failed during {what} due to invalid credentials with \
                             SASL mechanism {OAUTHBEARER}"
                        ))
                    }
                }
            }
        }
    }
}

/// `body` as a response frame; `None` (logged) when it cannot be encoded.
fn encode<M: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &M) -> Option<Bytes> {
    net::encode_response(key, version, correlation_id, body)
        .map_err(
            |e| tracing::error!(api = ?key, version, error = %e, "encoding a SASL response failed"),
        )
        .ok()
}

#[cfg(test)]
mod tests;
