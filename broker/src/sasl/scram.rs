//! The server side of SASL/SCRAM (RFC 5802, RFC 7677) as Kafka's `ScramSaslServer`: free of
//! I/O and randomness (the server nonce is handed in), two client messages per exchange.
//!
//! 1. client-first-message `n,[a=<authzid>],n=<saslname>,r=<client nonce>[,<ext>=<value>…]`:
//!    only the `n` channel-binding flag is accepted (no channel binding); the user's credential
//!    for the mechanism is looked up in the metadata image; the answer is
//!    server-first-message `r=<client nonce><server nonce>,s=<salt>,i=<iterations>`. Kafka's
//!    `tokenauth=true` extension asks for delegation-token authentication, which Sluice does
//!    not serve (it has no delegation tokens), so it fails as Kafka fails an unknown token;
//!    other extensions are ignored.
//! 2. client-final-message `c=<base64 gs2 header>,r=<nonce>,p=<proof>`: the nonce must be the
//!    combined one, the proof must give the stored key (compared in constant time); the answer
//!    is server-final-message `v=<server signature>` and the principal is `User:<name>`.
//!
//! Any failure ends the exchange with Kafka's message for the client: the generic
//! "Authentication failed during authentication due to invalid credentials with SASL mechanism
//! …" (so that a client learns nothing about which users exist), except for an authorization id
//! other than the user, which Kafka names.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use replication::metadata::scram::{
    ScramCredential, ScramCredentials, ScramMechanism, ITERATIONS_MIN,
};
use subtle::ConstantTimeEq;

/// Kafka's `ScramLoginModule.TOKEN_AUTH_CONFIG`: the extension asking for delegation-token
/// authentication.
const TOKEN_AUTH_EXTENSION: &str = "tokenauth";

/// Why an exchange failed: the message the client is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ScramFailure(pub String);

/// What a client message leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ScramStep {
    /// Send this challenge (server-first-message) and wait for the client's final message.
    Challenge(Vec<u8>),
    /// Authenticated as `user`: send this server-final-message.
    Done { user: String, reply: Vec<u8> },
}

#[derive(Debug)]
enum State {
    First {
        server_nonce: String,
    },
    Final {
        user: String,
        gs2_header: String,
        /// client-first-message-bare "," server-first-message "," (the start of the
        /// AuthMessage).
        auth_message_start: String,
        nonce: String,
        credential: ScramCredential,
    },
    /// Completed or failed: any further message fails.
    Over,
}

/// One SCRAM exchange.
#[derive(Debug)]
pub(super) struct ScramExchange {
    mechanism: ScramMechanism,
    state: State,
}

impl ScramExchange {
    /// An exchange of `mechanism` whose server nonce is `server_nonce` (printable ASCII
    /// without commas, from a secure random source).
    pub(super) fn new(mechanism: ScramMechanism, server_nonce: String) -> ScramExchange {
        ScramExchange {
            mechanism,
            state: State::First { server_nonce },
        }
    }

    /// The client's next message; `credentials`: the metadata image's.
    ///
    /// # Errors
    /// [`ScramFailure`] with Kafka's message; the exchange is over.
    pub(super) fn evaluate(
        &mut self,
        message: &[u8],
        credentials: &ScramCredentials,
    ) -> Result<ScramStep, ScramFailure> {
        let state = std::mem::replace(&mut self.state, State::Over);
        let outcome = match state {
            State::First { server_nonce } => self.first(message, &server_nonce, credentials),
            State::Final {
                user,
                gs2_header,
                auth_message_start,
                nonce,
                credential,
            } => self.last(
                message,
                &gs2_header,
                &auth_message_start,
                &nonce,
                &credential,
                user,
            ),
            State::Over => Err(None),
        };
        outcome.map_err(|specific| {
            ScramFailure(specific.unwrap_or_else(|| {
                format!(
                    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                    self.mechanism.name()
                )
            }))
        })
    }

    /// client-first-message; `Err(None)`: the generic failure, `Err(Some(m))`: Kafka's own
    /// message `m`.
    fn first(
        &mut self,
        message: &[u8],
        server_nonce: &str,
        credentials: &ScramCredentials,
    ) -> Result<ScramStep, Option<String>> {
        let first = ClientFirst::parse(message).ok_or(None)?;
        if first.token_auth {
            // Delegation tokens: none exist, so the token id is unknown.
            return Err(None);
        }
        let credential = credentials
            .get(&first.user)
            .and_then(|m| m.get(&self.mechanism))
            .ok_or(None)?;
        if !first.authzid.is_empty() && first.authzid != first.user {
            return Err(Some(
                "Authentication failed: Client requested an authorization id that is different from username"
                    .to_string(),
            ));
        }
        if credential.iterations < ITERATIONS_MIN {
            return Err(None);
        }
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        self.state = State::Final {
            user: first.user,
            gs2_header: first.gs2_header,
            auth_message_start: format!("{},{server_first},", first.bare),
            nonce,
            credential: credential.clone(),
        };
        Ok(ScramStep::Challenge(server_first.into_bytes()))
    }

    /// client-final-message.
    fn last(
        &self,
        message: &[u8],
        gs2_header: &str,
        auth_message_start: &str,
        nonce: &str,
        credential: &ScramCredential,
        user: String,
    ) -> Result<ScramStep, Option<String>> {
        let last = ClientFinal::parse(message).ok_or(None)?;
        if last.nonce != nonce || last.channel_binding != gs2_header.as_bytes() {
            return Err(None);
        }
        let auth_message = format!("{auth_message_start}{}", last.without_proof);
        let m = self.mechanism;
        let client_signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        if last.proof.len() != client_signature.len() {
            return Err(None);
        }
        let client_key: Vec<u8> = last
            .proof
            .iter()
            .zip(&client_signature)
            .map(|(p, s)| p ^ s)
            .collect();
        if !bool::from(m.hash(&client_key).ct_eq(&credential.stored_key)) {
            return Err(None);
        }
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        Ok(ScramStep::Done {
            user,
            reply: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
        })
    }
}

/// A parsed client-first-message.
struct ClientFirst {
    /// `n,[a=<authzid>],`
    gs2_header: String,
    /// The authorization id, decoded; empty when absent.
    authzid: String,
    /// client-first-message-bare, as sent.
    bare: String,
    /// The user name, decoded.
    user: String,
    nonce: String,
    /// `tokenauth=true` was among the extensions.
    token_auth: bool,
}

impl ClientFirst {
    /// `None` when `message` is not a client-first-message Kafka accepts.
    fn parse(message: &[u8]) -> Option<ClientFirst> {
        let text = std::str::from_utf8(message).ok()?;
        if !text.bytes().all(|b| (0x01..=0x7f).contains(&b)) {
            return None;
        }
        let rest = text.strip_prefix("n,")?;
        let (authz, bare) = rest.split_once(',')?;
        let authzid = match authz {
            "" => String::new(),
            a => sasl_name(a.strip_prefix("a=")?)?,
        };
        let gs2_header = format!("n,{authz},");
        let mut fields = bare.split(',');
        let user = sasl_name(fields.next()?.strip_prefix("n=")?)?;
        let nonce = fields.next()?.strip_prefix("r=")?;
        if !printable(nonce) {
            return None;
        }
        let mut token_auth = false;
        for extension in fields {
            let (key, value) = extension.split_once('=')?;
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) || value.is_empty() {
                return None;
            }
            if key == TOKEN_AUTH_EXTENSION && value.eq_ignore_ascii_case("true") {
                token_auth = true;
            }
        }
        Some(ClientFirst {
            gs2_header,
            authzid,
            bare: bare.to_string(),
            user,
            nonce: nonce.to_string(),
            token_auth,
        })
    }
}

/// A parsed client-final-message.
struct ClientFinal {
    channel_binding: Vec<u8>,
    nonce: String,
    /// client-final-message-without-proof, as sent.
    without_proof: String,
    proof: Vec<u8>,
}

impl ClientFinal {
    /// `None` when `message` is not a client-final-message Kafka accepts.
    fn parse(message: &[u8]) -> Option<ClientFinal> {
        let text = std::str::from_utf8(message).ok()?;
        if !text.bytes().all(|b| (0x01..=0x7f).contains(&b)) {
            return None;
        }
        let (without_proof, proof) = text.rsplit_once(",p=")?;
        let mut fields = without_proof.split(',');
        let channel_binding = BASE64.decode(fields.next()?.strip_prefix("c=")?).ok()?;
        let nonce = fields.next()?.strip_prefix("r=")?;
        if !printable(nonce) {
            return None;
        }
        for extension in fields {
            let (key, value) = extension.split_once('=')?;
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) || value.is_empty() {
                return None;
            }
        }
        Some(ClientFinal {
            channel_binding,
            nonce: nonce.to_string(),
            without_proof: without_proof.to_string(),
            proof: BASE64.decode(proof).ok()?,
        })
    }
}

/// RFC 5802's printable (0x21–0x7E but ','), at least one character.
fn printable(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// A saslname decoded as Kafka's `ScramFormatter.username` (`=2C` → `,`, `=3D` → `=`); `None`
/// when empty or holding another `=`.
fn sasl_name(s: &str) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let escape = rest.get(i..i + 3)?;
        out.push(match escape {
            "=2C" => ',',
            "=3D" => '=',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests;
