//! The client side of SASL, for a broker authenticating to another broker's SASL inter-broker
//! listener (Kafka's `sasl.mechanism.inter.broker.protocol`, default `GSSAPI`, which Sluice
//! does not speak): free of I/O, the tokens only.
//!
//! Credentials as Kafka's broker takes them: the `username` and `password` options of the
//! inter-broker listener's login module for the mechanism
//! (`listener.name.<l>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`) —
//! `PlainLoginModule` for `PLAIN`, `ScramLoginModule` for `SCRAM-SHA-256`/`SCRAM-SHA-512`.
//!
//! - `PLAIN` (RFC 4616): one token `NUL username NUL password`.
//! - SCRAM (RFC 5802, RFC 7677; [`ScramClient`]): client-first-message, then — from the
//!   server's salt and iteration count — the client-final-message with the proof, and a check
//!   of the server's signature. The iteration count must lie within Kafka's bounds
//!   (`ITERATIONS_MIN`..=`ITERATIONS_MAX`), so the key derivation is bounded (at most 16384
//!   HMACs; the caller runs it off the shard).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use replication::metadata::scram::{ScramMechanism, ITERATIONS_MAX, ITERATIONS_MIN};
use subtle::ConstantTimeEq;
use tuning::config::BrokerConfig;

use super::error::SaslConfigError;
use super::jaas::{self, PLAIN, PLAIN_LOGIN_MODULE};

/// Kafka's login module for SCRAM.
const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// How a broker authenticates to other brokers.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslCredentials {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslCredentials")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"[hidden]")
            .finish()
    }
}

impl SaslCredentials {
    /// The credentials this broker presents on SASL listener `listener` of other brokers
    /// (its inter-broker listener), with `sasl.mechanism.inter.broker.protocol`.
    ///
    /// # Errors
    /// [`SaslConfigError`] naming the key at fault: an unsupported mechanism, no JAAS entry,
    /// another login module, no `username` or `password`.
    pub fn inter_broker(
        config: &BrokerConfig,
        listener: &str,
    ) -> Result<SaslCredentials, SaslConfigError> {
        let mechanism = config
            .security_properties
            .get("sasl.mechanism.inter.broker.protocol")
            .map_or("GSSAPI", String::as_str)
            .to_ascii_uppercase();
        let module = if mechanism == PLAIN {
            PLAIN_LOGIN_MODULE
        } else if ScramMechanism::from_name(&mechanism).is_some() {
            SCRAM_LOGIN_MODULE
        } else {
            return Err(SaslConfigError::BadJaasConfig {
                key: "sasl.mechanism.inter.broker.protocol".to_owned(),
                why: format!(
                    "{mechanism}: brokers authenticate to each other with PLAIN, SCRAM-SHA-256 \
                     or SCRAM-SHA-512"
                ),
            });
        };
        let (key, options) = jaas::listener_options(config, listener, &mechanism, module, |key| {
            SaslConfigError::BadJaasConfig {
                key,
                why: format!(
                    "the inter-broker listener {listener} uses SASL: set the broker's \
                     username and password there"
                ),
            }
        })?;
        let option = |name: &str| {
            options
                .get(name)
                .filter(|v| !v.is_empty())
                .cloned()
                .ok_or_else(|| SaslConfigError::BadJaasConfig {
                    key: key.clone(),
                    why: format!("no {name} option: the broker's own credentials between brokers"),
                })
        };
        Ok(SaslCredentials {
            username: option("username")?,
            password: option("password")?,
            mechanism,
        })
    }

    /// `PLAIN`'s token (RFC 4616, no authorization id).
    pub fn plain_token(&self) -> Vec<u8> {
        let mut token = Vec::with_capacity(2 + self.username.len() + self.password.len());
        token.push(0);
        token.extend_from_slice(self.username.as_bytes());
        token.push(0);
        token.extend_from_slice(self.password.as_bytes());
        token
    }
}

/// Why a SCRAM exchange failed on the client side.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScramClientError {
    /// The server's message does not parse, or its nonce does not extend ours.
    #[error("malformed server message: {0}")]
    Malformed(&'static str),
    /// The iteration count is outside Kafka's bounds.
    #[error("iteration count {0} outside {ITERATIONS_MIN}..={ITERATIONS_MAX}")]
    Iterations(i64),
    /// The server answered `e=…`.
    #[error("the server refused: {0}")]
    Refused(String),
    /// The server's signature is wrong: it does not know our credential.
    #[error("the server's signature does not verify")]
    BadServerSignature,
}

/// One SCRAM exchange, client side (RFC 5802 §3).
#[derive(Debug)]
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    client_nonce: String,
    /// The server signature expected in the server-final-message (after
    /// [`ScramClient::client_final`]).
    server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// An exchange of `credentials` (a SCRAM mechanism; else `None`) with `client_nonce`
    /// (printable, without commas, from a secure random source).
    pub fn new(credentials: &SaslCredentials, client_nonce: String) -> Option<ScramClient> {
        let mechanism = ScramMechanism::from_name(&credentials.mechanism)?;
        let name = credentials.username.replace('=', "=3D").replace(',', "=2C");
        Some(ScramClient {
            mechanism,
            password: credentials.password.clone(),
            client_first_bare: format!("n={name},r={client_nonce}"),
            client_nonce,
            server_signature: None,
        })
    }

    /// client-first-message (no channel binding, no authorization id).
    pub fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// client-final-message for `server_first`. Costs the key derivation (up to
    /// `ITERATIONS_MAX` HMACs): run it off the shard.
    ///
    /// # Errors
    /// [`ScramClientError`]: the server's message is malformed or out of bounds.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramClientError> {
        let text = std::str::from_utf8(server_first)
            .map_err(|_| ScramClientError::Malformed("not UTF-8"))?;
        if let Some(error) = text.strip_prefix("e=") {
            return Err(ScramClientError::Refused(error.to_owned()));
        }
        let field = |name: &str| {
            text.split(',')
                .find_map(|part| part.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        };
        let nonce = field("r").ok_or(ScramClientError::Malformed("no nonce"))?;
        if nonce.len() <= self.client_nonce.len() || !nonce.starts_with(&self.client_nonce) {
            return Err(ScramClientError::Malformed(
                "the nonce does not extend the client's",
            ));
        }
        let salt = field("s")
            .and_then(|s| BASE64.decode(s).ok())
            .ok_or(ScramClientError::Malformed("no salt"))?;
        let iterations: i64 = field("i")
            .and_then(|i| i.parse().ok())
            .ok_or(ScramClientError::Malformed("no iteration count"))?;
        if !(i64::from(ITERATIONS_MIN)..=i64::from(ITERATIONS_MAX)).contains(&iterations) {
            return Err(ScramClientError::Iterations(iterations));
        }
        let iterations =
            u32::try_from(iterations).map_err(|_| ScramClientError::Iterations(iterations))?;
        let salted = salted_password(self.mechanism, &self.password, &salt, iterations);
        let client_key = self.mechanism.hmac(&salted, b"Client Key");
        let stored_key = self.mechanism.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = self.mechanism.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = self.mechanism.server_key(&salted);
        self.server_signature = Some(self.mechanism.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks server-final-message `server_final` (`v=<signature>`).
    ///
    /// # Errors
    /// [`ScramClientError`]: the server refused, or its signature is wrong or missing.
    pub fn check_server_final(&self, server_final: &[u8]) -> Result<(), ScramClientError> {
        let text = std::str::from_utf8(server_final)
            .map_err(|_| ScramClientError::Malformed("not UTF-8"))?;
        if let Some(error) = text.strip_prefix("e=") {
            return Err(ScramClientError::Refused(error.to_owned()));
        }
        let got = text
            .split(',')
            .find_map(|p| p.strip_prefix("v="))
            .and_then(|v| BASE64.decode(v).ok())
            .ok_or(ScramClientError::Malformed("no server signature"))?;
        let expected = self
            .server_signature
            .as_deref()
            .ok_or(ScramClientError::Malformed(
                "server-final before server-first",
            ))?;
        if bool::from(expected.ct_eq(&got)) {
            Ok(())
        } else {
            Err(ScramClientError::BadServerSignature)
        }
    }
}

/// RFC 5802's `Hi(password, salt, iterations)` (PBKDF2 with the mechanism's HMAC).
fn salted_password(
    mechanism: ScramMechanism,
    password: &str,
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => {
            let mut out = vec![0u8; 32];
            pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password.as_bytes(), salt, iterations, &mut out);
            out
        }
        ScramMechanism::Sha512 => {
            let mut out = vec![0u8; 64];
            pbkdf2::pbkdf2_hmac::<sha2::Sha512>(password.as_bytes(), salt, iterations, &mut out);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::scram::{ScramExchange, ScramStep};
    use replication::metadata::scram::{ScramCredential, ScramCredentials};

    fn config(pairs: &[(&str, &str)]) -> BrokerConfig {
        let mut c = BrokerConfig::default();
        c.set_all(pairs.iter().copied()).expect("valid keys");
        c
    }

    /// The credentials come from the listener's login module for the mechanism, as Kafka's.
    #[test]
    fn credentials_from_the_jaas_entry() {
        let c = config(&[
            ("sasl.mechanism.inter.broker.protocol", "PLAIN"),
            (
                "listener.name.internal.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required \
                 username=\"broker\" password=\"b-secret\" user_broker=\"b-secret\";",
            ),
        ]);
        let creds = SaslCredentials::inter_broker(&c, "INTERNAL").expect("PLAIN");
        assert_eq!(creds.username, "broker");
        assert_eq!(creds.plain_token(), b"\0broker\0b-secret");
        assert!(!format!("{creds:?}").contains("b-secret"));
        let err = SaslCredentials::inter_broker(&config(&[]), "INTERNAL").unwrap_err();
        assert!(
            err.to_string()
                .contains("sasl.mechanism.inter.broker.protocol"),
            "{err}"
        );
        let c = config(&[
            ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-256"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required \
                 username=\"broker\" password=\"x\";",
            ),
        ]);
        let err = SaslCredentials::inter_broker(&c, "INTERNAL").unwrap_err();
        assert!(err.to_string().contains("ScramLoginModule"), "{err}");
    }

    /// A full exchange against the broker's own SCRAM server, then a wrong password and a
    /// forged server signature.
    #[test]
    fn scram_exchange_against_the_server() {
        for mechanism in ScramMechanism::ALL {
            let salt = b"0123456789abcdef".to_vec();
            let salted = salted_password(mechanism, "pw", &salt, 4096);
            let mut users = std::collections::BTreeMap::new();
            users.insert(
                mechanism,
                ScramCredential {
                    salt: salt.clone(),
                    stored_key: mechanism.stored_key(&salted),
                    server_key: mechanism.server_key(&salted),
                    iterations: 4096,
                },
            );
            let mut credentials = ScramCredentials::new();
            credentials.insert("broker".to_owned(), users);
            let creds = SaslCredentials {
                mechanism: mechanism.name().to_owned(),
                username: "broker".to_owned(),
                password: "pw".to_owned(),
            };
            let mut client = ScramClient::new(&creds, "cnonce".to_owned()).expect("SCRAM");
            let mut server = ScramExchange::new(mechanism, "snonce".to_owned());
            let ScramStep::Challenge(first) = server
                .evaluate(&client.client_first(), &credentials)
                .expect("first")
            else {
                panic!("no challenge")
            };
            let last = client.client_final(&first).expect("final");
            let ScramStep::Done { user, reply } =
                server.evaluate(&last, &credentials).expect("proof")
            else {
                panic!("not done")
            };
            assert_eq!(user, "broker");
            client.check_server_final(&reply).expect("signature");
            assert_eq!(
                client.check_server_final(b"v=AAAA"),
                Err(ScramClientError::BadServerSignature)
            );

            let wrong = SaslCredentials {
                password: "nope".to_owned(),
                ..creds
            };
            let mut client = ScramClient::new(&wrong, "cnonce".to_owned()).expect("SCRAM");
            let mut server = ScramExchange::new(mechanism, "snonce".to_owned());
            let Ok(ScramStep::Challenge(first)) =
                server.evaluate(&client.client_first(), &credentials)
            else {
                panic!("no challenge")
            };
            let last = client.client_final(&first).expect("final");
            assert!(server.evaluate(&last, &credentials).is_err());
        }
    }

    #[test]
    fn bad_server_first_messages() {
        let creds = SaslCredentials {
            mechanism: "SCRAM-SHA-256".to_owned(),
            username: "a=b,c".to_owned(),
            password: "pw".to_owned(),
        };
        let mut client = ScramClient::new(&creds, "abc".to_owned()).expect("SCRAM");
        assert_eq!(client.client_first(), b"n,,n=a=3Db=2Cc,r=abc");
        for (bad, want) in [
            (&b"r=xyz123,s=AAAA,i=4096"[..], "nonce"),
            (b"r=abc,s=AAAA,i=4096", "nonce"),
            (b"r=abcd,i=4096", "salt"),
            (b"r=abcd,s=AAAA,i=10", "iteration"),
            (b"r=abcd,s=AAAA,i=99999999999", "iteration"),
            (b"e=unknown-user", "refused"),
            (b"\xff", "UTF-8"),
        ] {
            let err = client.client_final(bad).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
        assert!(
            client.check_server_final(b"v=AAAA").is_err(),
            "before server-first"
        );
    }
}
