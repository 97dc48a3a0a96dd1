//! SASL authentication on `SASL_PLAINTEXT` and `SASL_SSL` listeners (KIP-43, KIP-152), as
//! Kafka's `SaslServerAuthenticator`: a state machine free of I/O, one per connection, fed the
//! connection's frames until the client is authenticated.
//!
//! 1. Handshake: ApiVersions is served as usual; SaslHandshake (17) names a mechanism. One
//!    this listener serves is accepted; any other (Kafka's default `GSSAPI`, `SCRAM-*`,
//!    `OAUTHBEARER`: Sluice serves only `PLAIN` yet) is answered UNSUPPORTED_SASL_MECHANISM
//!    with the served list, and the connection closed.
//! 2. Authenticate: SaslAuthenticate (36) carries the client's token (after a v0 handshake the
//!    token comes as a bare size-prefixed frame, and so does the answer). `PLAIN` (RFC 4616)
//!    checks the user and password against the listener's `PlainLoginModule` users
//!    (`user_<name>="<password>"`), comparing in constant time. Success names the principal
//!    `User:<name>`; failure is answered SASL_AUTHENTICATION_FAILED (58) after
//!    `connection.failed.authentication.delay.ms`, then the connection closes.
//!
//! Any other request before authentication closes the connection unanswered (Kafka's
//! IllegalSaslStateException), as does a frame that does not decode. After authentication
//! the connection serves requests; SaslHandshake and SaslAuthenticate then answer
//! ILLEGAL_SASL_STATE (the handlers do that).

mod jaas;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::{
    ApiKey, RequestKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use net::kafka_protocol::protocol::{Encodable, StrBytes};
use net::ApiVersionTable;
use subtle::ConstantTimeEq;
use tuning::config::BrokerConfig;

/// The mechanisms Sluice serves.
pub const SERVED_MECHANISMS: &[&str] = &["PLAIN"];

/// Kafka's default `sasl.enabled.mechanisms`.
const DEFAULT_ENABLED_MECHANISMS: &str = "GSSAPI";

/// The login module `PLAIN`'s `sasl.jaas.config` must name.
const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// Longest SASL token accepted, bytes (a PLAIN token is three short strings; Kafka bounds
/// tokens by `sasl.server.max.receive.size`, default 524288).
const TOKEN_MAX_BYTES: usize = 524_288;

/// Largest frame read from a client before it is authenticated, bytes (Kafka's
/// `sasl.server.max.receive.size` default): a bigger one closes the connection.
pub const UNAUTHENTICATED_FRAME_MAX_BYTES: usize = TOKEN_MAX_BYTES;

/// Why a SASL listener's settings cannot be used (the broker does not start).
#[derive(Debug, thiserror::Error)]
pub enum SaslConfigError {
    /// `PLAIN` is enabled but no `sasl.jaas.config` names its users.
    #[error(
        "listener {listener}: PLAIN is enabled but neither listener.name.{lower}.plain.sasl.jaas.config \
         nor sasl.jaas.config is set"
    )]
    NoJaasConfig { listener: String, lower: String },
    /// The JAAS entry does not parse or names another login module.
    #[error("{key}: {why}")]
    BadJaasConfig { key: String, why: String },
    /// None of `sasl.enabled.mechanisms` is served by Sluice.
    #[error("listener {listener}: sasl.enabled.mechanisms={enabled}: Sluice serves only {served}")]
    NoServedMechanism {
        listener: String,
        enabled: String,
        served: String,
    },
}

/// A SASL listener's settings, shared by its connections.
#[derive(Debug)]
pub struct SaslListener {
    /// The enabled mechanisms Sluice serves, upper case.
    mechanisms: Vec<String>,
    /// `PLAIN`'s users and their passwords.
    plain_users: BTreeMap<String, String>,
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
        let lower = listener.to_ascii_lowercase();
        let prefixed = format!("listener.name.{lower}.plain.sasl.jaas.config");
        let (key, text) = match (
            config.security_properties.get(&prefixed),
            config.security_properties.get("sasl.jaas.config"),
        ) {
            (Some(text), _) => (prefixed, text),
            (None, Some(text)) => ("sasl.jaas.config".to_owned(), text),
            (None, None) => {
                return Err(SaslConfigError::NoJaasConfig {
                    listener: listener.to_owned(),
                    lower,
                })
            }
        };
        let entry = jaas::parse(text).map_err(|why| SaslConfigError::BadJaasConfig {
            key: key.clone(),
            why,
        })?;
        if entry.module != PLAIN_LOGIN_MODULE {
            return Err(SaslConfigError::BadJaasConfig {
                key,
                why: format!("PLAIN needs {PLAIN_LOGIN_MODULE}, not {}", entry.module),
            });
        }
        let plain_users = entry
            .options
            .into_iter()
            .filter_map(|(k, v)| k.strip_prefix("user_").map(|u| (u.to_owned(), v)))
            .collect();
        Ok(SaslListener {
            mechanisms,
            plain_users,
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

/// What the connection does with a frame (see [`SaslServer::on_frame`]).
#[derive(Debug)]
pub enum Step {
    /// Not the authenticator's (ApiVersions during the handshake): serve it as usual.
    Serve,
    /// Send this response frame and read on.
    Answer(Bytes),
    /// Authenticated as `principal` (`User:<name>`): send this response frame, then serve
    /// requests.
    Authenticated { answer: Bytes, principal: String },
    /// Send this response frame, then close; `delayed`: an authentication failure, held back
    /// `connection.failed.authentication.delay.ms`.
    AnswerThenClose { answer: Bytes, delayed: bool },
    /// Close without an answer.
    Close,
}

#[derive(Debug)]
enum State {
    Handshake,
    /// After a SaslHandshake; `raw`: a v0 one, whose token comes unwrapped.
    Authenticate {
        raw: bool,
    },
}

/// One connection's authenticator.
#[derive(Debug)]
pub struct SaslServer {
    listener: Arc<SaslListener>,
    state: State,
}

impl SaslServer {
    /// A connection's authenticator on `listener`, before the handshake.
    pub fn new(listener: Arc<SaslListener>) -> SaslServer {
        SaslServer {
            listener,
            state: State::Handshake,
        }
    }

    /// The next frame from the client (`versions`: the broker's ApiVersions table).
    pub fn on_frame(&mut self, frame: Bytes, versions: &ApiVersionTable) -> Step {
        if let State::Authenticate { raw: true } = self.state {
            return self.raw_token(&frame);
        }
        let key = frame.first_chunk::<2>().map(|k| i16::from_be_bytes(*k));
        if matches!(self.state, State::Handshake) && key == Some(ApiKey::ApiVersions as i16) {
            return Step::Serve;
        }
        let Ok(request) = net::decode_request(frame, versions) else {
            return Step::Close;
        };
        let (version, correlation_id) = (request.api_version, request.correlation_id());
        match (&self.state, request.body) {
            (State::Handshake, RequestKind::SaslHandshake(req)) => {
                let mechanism = req.mechanism.to_string();
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
                let Some(answer) =
                    encode(ApiKey::SaslHandshake, version, correlation_id, &response)
                else {
                    return Step::Close;
                };
                if !served {
                    return Step::AnswerThenClose {
                        answer,
                        delayed: false,
                    };
                }
                self.state = State::Authenticate { raw: version == 0 };
                Step::Answer(answer)
            }
            (State::Authenticate { .. }, RequestKind::SaslAuthenticate(req)) => {
                let outcome = self.check_token(&req.auth_bytes);
                let mut response = SaslAuthenticateResponse::default();
                if let Err(message) = outcome {
                    response.error_code = ResponseError::SaslAuthenticationFailed.code();
                    response.error_message = Some(StrBytes::from_static_str(message));
                }
                let Some(answer) =
                    encode(ApiKey::SaslAuthenticate, version, correlation_id, &response)
                else {
                    return Step::Close;
                };
                match outcome {
                    Ok(user) => Step::Authenticated {
                        answer,
                        principal: format!("User:{user}"),
                    },
                    Err(_) => Step::AnswerThenClose {
                        answer,
                        delayed: true,
                    },
                }
            }
            _ => Step::Close,
        }
    }

    /// A token after a v0 handshake: answered with a bare frame (empty for PLAIN) on
    /// success; a failure closes the connection, as Kafka's v0 flow does.
    fn raw_token(&mut self, token: &[u8]) -> Step {
        match self.check_token(token) {
            Ok(user) => Step::Authenticated {
                answer: Bytes::from_static(&[0, 0, 0, 0]),
                principal: format!("User:{user}"),
            },
            Err(_) => Step::Close,
        }
    }

    fn check_token(&self, token: &[u8]) -> Result<String, &'static str> {
        if token.len() > TOKEN_MAX_BYTES {
            return Err("Authentication failed: token too large");
        }
        self.listener.authenticate_plain(token)
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
