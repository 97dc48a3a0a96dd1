//! What OAUTHBEARER's validators answer: an accepted token, or why one was refused (with
//! RFC 7628's error challenge); a leaf below the validators and the exchange.

/// The server callback handler that selects the JWKS validator (KIP-768).
pub const JWKS_HANDLER_CLASS: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";

/// A token a validator accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    /// The principal's name (the principal claim).
    pub principal: String,
    /// When the token expires, ms since the Unix epoch (its `exp` claim).
    pub expiry_unix_ms: i64,
}

/// Why a validator refused a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What was wrong (logged, not sent).
    pub why: String,
    /// The required scope the token lacks (Kafka's `insufficient_scope` status), rendered as
    /// Kafka renders it (`[a, b]`).
    pub scope: Option<String>,
}

impl Refusal {
    /// A refusal for `why` (status `invalid_token`).
    pub fn invalid(why: impl Into<String>) -> Refusal {
        Refusal {
            why: why.into(),
            scope: None,
        }
    }

    /// RFC 7628's error challenge, formatted as Kafka's `OAuthBearerSaslServer` formats it.
    pub fn challenge(&self) -> String {
        match &self.scope {
            None => r#"{"status":"invalid_token"}"#.to_owned(),
            Some(scope) => format!(r#"{{"status":"insufficient_scope", "scope":"{scope}"}}"#),
        }
    }
}
