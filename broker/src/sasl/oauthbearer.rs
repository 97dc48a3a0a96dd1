//! SASL/OAUTHBEARER (RFC 7628, KIP-255; extensions KIP-342), as Kafka's
//! `OAuthBearerSaslServer`: one client message carries the token; a token the validator
//! refuses is answered with RFC 7628's error challenge (`{"status":"invalid_token"}`), the
//! client acknowledges it with a single `0x01`, and only then does the exchange fail
//! (SASL_AUTHENTICATION_FAILED with the challenge as the message).
//!
//! The validator is chosen as Kafka chooses it: without
//! `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class` the unsecured-JWS
//! validator (`unsecured`, options from the listener's `OAuthBearerLoginModule` line); with
//! [`JWKS_HANDLER_CLASS`], signed JWTs checked against a JWKS (`jwks`). Every extension the
//! client sends is accepted, as both of Kafka's validators accept them.

mod jwks;
mod jwks_fetch;
mod token;
mod unsecured;

use std::collections::BTreeMap;

pub use jwks::{JwksConfigError, JwksValidator};
pub use token::{Refusal, ValidToken, JWKS_HANDLER_CLASS};
pub use unsecured::UnsecuredOptions;

/// The mechanism's name.
pub const OAUTHBEARER: &str = "OAUTHBEARER";

/// The login module OAUTHBEARER's `sasl.jaas.config` must name.
pub const LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// The separator of RFC 7628's key-value pairs (`kvsep`).
const SEPARATOR: char = '\u{1}';

/// The name of the key-value pair that carries the token.
const AUTH_KEY: &str = "auth";

/// A client's first (and only) message: `n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A]*^A`.
#[derive(Debug, PartialEq, Eq)]
pub struct ClientFirstMessage<'a> {
    /// The authorisation id, as sent (empty: none).
    pub authzid: &'a str,
    /// The bearer token.
    pub token: &'a str,
    /// The SASL extensions (KIP-342), by name.
    pub extensions: BTreeMap<&'a str, &'a str>,
}

/// Parses a client first message with the grammar of Kafka's
/// `OAuthBearerClientInitialResponse`.
///
/// # Errors
/// Kafka's description of what is wrong (logged, never sent to the client).
pub fn parse_client_first(message: &[u8]) -> Result<ClientFirstMessage<'_>, &'static str> {
    const INVALID: &str = "Invalid OAUTHBEARER client first message";
    let text = std::str::from_utf8(message).map_err(|_| INVALID)?;
    let rest = text.strip_prefix("n,").ok_or(INVALID)?;
    let (authzid, rest) = match rest.strip_prefix("a=") {
        Some(named) => {
            let end = named.find(',').ok_or(INVALID)?;
            let name = &named[..end];
            if !is_sasl_name(name) {
                return Err(INVALID);
            }
            (name, &named[end..])
        }
        None => ("", rest),
    };
    let pairs = rest
        .strip_prefix(',')
        .and_then(|r| r.strip_prefix(SEPARATOR))
        .and_then(|r| r.strip_suffix(SEPARATOR))
        .ok_or(INVALID)?;
    let mut properties = BTreeMap::new();
    if !pairs.is_empty() {
        let pairs = pairs.strip_suffix(SEPARATOR).ok_or(INVALID)?;
        for pair in pairs.split(SEPARATOR) {
            let (key, value) = pair.split_once('=').ok_or(INVALID)?;
            if !is_extension_key(key) || !is_extension_value(value) {
                return Err(INVALID);
            }
            properties.insert(key, value);
        }
    }
    let auth = properties
        .remove(AUTH_KEY)
        .ok_or("Invalid OAUTHBEARER client first message: 'auth' not specified")?;
    let token = bearer_token(auth)?;
    Ok(ClientFirstMessage {
        authzid,
        token,
        extensions: properties,
    })
}

/// The token of an `auth` value: `<scheme> +<token>`, the scheme `Bearer` in any case.
fn bearer_token(auth: &str) -> Result<&str, &'static str> {
    const BAD_FORMAT: &str = "Invalid OAUTHBEARER client first message: invalid 'auth' format";
    let (scheme, token) = auth.split_once(' ').ok_or(BAD_FORMAT)?;
    let token = token.trim_start_matches(' ');
    let scheme_ok = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    let body = token.trim_end_matches('=');
    let token_ok = !body.is_empty()
        && body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_~+/.".contains(c));
    if !scheme_ok || !token_ok {
        return Err(BAD_FORMAT);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err("Invalid scheme in OAUTHBEARER client first message");
    }
    Ok(token)
}

/// RFC 7628's `saslname`: ASCII other than `=` and `,`, which come escaped as `=3D`, `=2C`.
fn is_sasl_name(name: &str) -> bool {
    let mut rest = name;
    if rest.is_empty() {
        return false;
    }
    while let Some(c) = rest.chars().next() {
        if c == '=' {
            if !(rest.starts_with("=2C") || rest.starts_with("=3D")) {
                return false;
            }
            rest = &rest[3..];
        } else if c == ',' || !('\u{1}'..='\u{7f}').contains(&c) {
            return false;
        } else {
            rest = &rest[1..];
        }
    }
    true
}

/// RFC 7628's `key`: letters only.
fn is_extension_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphabetic())
}

/// RFC 7628's `value`: visible ASCII, space, tab, CR, LF.
fn is_extension_value(value: &str) -> bool {
    !value.is_empty()
        && value
            .chars()
            .all(|c| ('\u{21}'..='\u{7e}').contains(&c) || matches!(c, ' ' | '\t' | '\r' | '\n'))
}

/// The validator of a listener's OAUTHBEARER tokens.
#[derive(Debug)]
pub enum Validator {
    /// Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler`: unsigned JWS (`alg` none).
    Unsecured(UnsecuredOptions),
    /// Kafka's `OAuthBearerValidatorCallbackHandler`: JWTs signed by a key of a JWKS.
    Jwks(JwksValidator),
}

impl Validator {
    /// Checks `token` at wall-clock time `now_unix_ms`.
    ///
    /// # Errors
    /// A [`Refusal`] saying why.
    pub fn validate(&self, token: &str, now_unix_ms: i64) -> Result<ValidToken, Refusal> {
        match self {
            Validator::Unsecured(options) => unsecured::validate(token, options, now_unix_ms),
            Validator::Jwks(v) => v.validate(token, now_unix_ms),
        }
    }
}

/// What the client's token leads to.
#[derive(Debug, PartialEq, Eq)]
pub enum OAuthStep {
    /// The token was refused: send this error challenge and wait for the client's `0x01`.
    Challenge(String),
    /// Authenticated.
    Done(ValidToken),
}

/// Why the exchange failed (SASL_AUTHENTICATION_FAILED).
#[derive(Debug, PartialEq, Eq)]
pub enum OAuthFailure {
    /// Kafka's `SaslAuthenticationException`: its message goes to the client.
    Authentication(String),
    /// Kafka's `SaslException` (a message that does not parse): the client gets Kafka's
    /// generic message only.
    Malformed(&'static str),
}

/// One connection's OAUTHBEARER exchange.
#[derive(Debug, Default)]
pub struct OAuthExchange {
    /// The error challenge sent, while the client's `0x01` is awaited.
    challenge_sent: Option<String>,
}

impl OAuthExchange {
    /// The client's next message, checked by `validator` at `now_unix_ms`.
    ///
    /// # Errors
    /// [`OAuthFailure`]: the exchange fails.
    pub fn evaluate(
        &mut self,
        message: &[u8],
        validator: &Validator,
        now_unix_ms: i64,
    ) -> Result<OAuthStep, OAuthFailure> {
        if let Some(challenge) = self.challenge_sent.take() {
            if message == [0x01] {
                return Err(OAuthFailure::Authentication(challenge));
            }
        }
        let first = parse_client_first(message).map_err(OAuthFailure::Malformed)?;
        match validator.validate(first.token, now_unix_ms) {
            Err(refusal) => {
                tracing::debug!(why = %refusal.why, "OAUTHBEARER token refused");
                let challenge = refusal.challenge();
                self.challenge_sent = Some(challenge.clone());
                Ok(OAuthStep::Challenge(challenge))
            }
            Ok(token) => {
                if !first.authzid.is_empty() && first.authzid != token.principal {
                    return Err(OAuthFailure::Authentication(format!(
                        "Authentication failed: Client requested an authorization id ({}) that is \
                         different from the token's principal name ({})",
                        first.authzid, token.principal
                    )));
                }
                Ok(OAuthStep::Done(token))
            }
        }
    }
}

#[cfg(test)]
mod tests;
