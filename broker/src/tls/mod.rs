//! TLS on `SSL` and `SASL_SSL` listeners (DESIGN.md §12): rustls (ring provider, no OpenSSL)
//! over the runtime's streams, which implement the futures I/O traits. One [`ListenerTls`] per
//! TLS listener is built at start-up from Kafka's keys (`ssl.*`, overridden per listener by
//! `listener.name.<listener>.ssl.*`):
//!
//! - the key store and trust store in PEM (see `keys`);
//! - `ssl.enabled.protocols` (TLSv1.2, TLSv1.3; default both) and `ssl.cipher.suites` (IANA
//!   names as Java writes them, e.g. `TLS_AES_128_GCM_SHA256`,
//!   `TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384`; default every suite rustls offers);
//! - `ssl.client.auth` `required` (a client without a certificate the trust store vouches for
//!   fails the handshake), `requested` (a certificate is asked for, not needed) or `none`
//!   (default);
//! - the principal of a client with a certificate: its subject's distinguished name through
//!   `ssl.principal.mapping.rules` ([`PrincipalMapper`]).
//!
//! Records sent over TLS are copied into the TLS stream and encrypted in user space; zero-copy
//! fetch stays on plaintext listeners. A handshake that fails or does not finish within
//! [`TLS_HANDSHAKE_TIMEOUT`] closes that connection only.

mod client;
mod error;
mod keys;
mod principal;
mod settings;

pub use client::{PeerTls, PeerTlsStream};
pub use error::TlsConfigError;
pub use principal::{NoMatchingRule, PrincipalMapper};
pub use settings::TLS_HANDSHAKE_TIMEOUT;
use settings::{
    client_auth, crypto_provider, key_pair, listener_key, protocol_versions, trust_store,
};

use std::sync::Arc;

use futures_lite::{AsyncRead, AsyncWrite};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;
use tuning::config::BrokerConfig;

/// Why a TLS client was not accepted (the connection is closed).
#[derive(Debug, thiserror::Error)]
pub enum TlsAcceptError {
    /// The handshake failed: not TLS, no acceptable certificate, no common protocol or suite.
    #[error("TLS handshake failed: {0}")]
    Handshake(#[from] std::io::Error),
    /// The handshake did not finish within [`TLS_HANDSHAKE_TIMEOUT`].
    #[error("TLS handshake not finished within {TLS_HANDSHAKE_TIMEOUT:?}")]
    TimedOut,
    /// The client certificate's subject does not parse.
    #[error("client certificate: {0}")]
    Certificate(String),
    /// No `ssl.principal.mapping.rules` rule applies to the subject.
    #[error(transparent)]
    NoMatchingRule(#[from] NoMatchingRule),
}

/// A TLS listener's server side: shared by every shard (immutable once built).
#[derive(Clone)]
pub struct ListenerTls {
    acceptor: futures_rustls::TlsAcceptor,
    mapper: Arc<PrincipalMapper>,
}

/// A client's TLS stream once accepted, and its principal name from the client certificate
/// (`None`: the client sent none).
pub type Accepted<S> = (futures_rustls::server::TlsStream<S>, Option<String>);

impl ListenerTls {
    /// Builds listener `listener`'s TLS side from `config`. Blocking (reads key files): call
    /// at start-up.
    ///
    /// # Errors
    /// [`TlsConfigError`] naming the key at fault.
    pub fn new(config: &BrokerConfig, listener: &str) -> Result<ListenerTls, TlsConfigError> {
        let (chain, key) = key_pair(config, listener)?.ok_or_else(|| TlsConfigError::Invalid {
            key: format!(
                "listener.name.{}.ssl.keystore.location",
                listener.to_ascii_lowercase()
            ),
            why: format!(
                "listener {listener} uses TLS: set ssl.keystore.location, or \
                 ssl.keystore.certificate.chain and ssl.keystore.key (PEM)"
            ),
        })?;
        let provider = Arc::new(crypto_provider(config, listener)?);
        let versions = protocol_versions(config, listener)?;
        let rustls_error = |source| TlsConfigError::Rustls {
            listener: listener.to_owned(),
            source,
        };
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(rustls_error)?;
        let client_auth = client_auth(config, listener);
        let builder = if client_auth == "none" {
            builder.with_no_client_auth()
        } else {
            let roots = trust_store(config, listener)?.ok_or_else(|| TlsConfigError::Invalid {
                key: listener_key(config, listener, "ssl.client.auth"),
                why: "client authentication needs a trust store: set ssl.truststore.location \
                      or ssl.truststore.certificates (PEM)"
                    .to_owned(),
            })?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if client_auth == "requested" {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier.build().map_err(|e| TlsConfigError::Invalid {
                key: listener_key(config, listener, "ssl.truststore.certificates"),
                why: e.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        };
        let server = builder.with_single_cert(chain, key).map_err(rustls_error)?;
        let rules = config
            .security_properties
            .get("ssl.principal.mapping.rules")
            .map_or(principal::DEFAULT_RULES, String::as_str);
        Ok(ListenerTls {
            acceptor: futures_rustls::TlsAcceptor::from(Arc::new(server)),
            mapper: Arc::new(PrincipalMapper::parse(rules)?),
        })
    }

    /// Runs the server handshake on `stream` (at most [`TLS_HANDSHAKE_TIMEOUT`]) and names the
    /// client's principal from its certificate.
    ///
    /// # Errors
    /// [`TlsAcceptError`]: the connection must be closed.
    pub async fn accept<S>(&self, stream: S) -> Result<Accepted<S>, TlsAcceptError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let handshake = async { Some(self.acceptor.accept(stream).await) };
        let timeout = async {
            crate::rt::sleep(TLS_HANDSHAKE_TIMEOUT).await;
            None
        };
        let stream = futures_lite::future::or(handshake, timeout)
            .await
            .ok_or(TlsAcceptError::TimedOut)??;
        let principal = match stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
        {
            Some(cert) => Some(self.mapper.name(&subject(cert)?)?),
            None => None,
        };
        Ok((stream, principal))
    }
}

/// The subject of certificate `der` in RFC 2253/4514 form (`CN=…,OU=…,O=…`, most specific
/// first), as Java's `X500Principal.getName()` gives it.
fn subject(der: &[u8]) -> Result<String, TlsAcceptError> {
    use x509_cert::der::Decode;
    let cert = x509_cert::Certificate::from_der(der)
        .map_err(|e| TlsAcceptError::Certificate(e.to_string()))?;
    Ok(cert.tbs_certificate.subject.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;

    /// A client certificate made by tests/compat/tls_certs.py (subject O=Sluice Test,
    /// OU=clients, CN=alice, in that order in the certificate).
    const ALICE: &str = "-----BEGIN CERTIFICATE-----
MIIBjTCCATSgAwIBAgIUf5KyZKXlnMxnJF2hOKYlxAp9iGAwCgYIKoZIzj0EAwIw
LzEUMBIGA1UECgwLU2x1aWNlIFRlc3QxFzAVBgNVBAMMDlNsdWljZSBUZXN0IENB
MB4XDTI2MTIwNDA3NDExNFoXDTI3MDEwNDA3NDExNFowODEUMBIGA1UECgwLU2x1
aWNlIFRlc3QxEDAOBgNVBAsMB2NsaWVudHMxDjAMBgNVBAMMBWFsaWNlMFkwEwYH
KoZIzj0CAQYIKoZIzj0DAQcDQgAEjP3X7aNDJLQCmZWCZRJYC/zjPxzZ8tal/Ec0
LQ2eFlo1aBqNwpcFRWjYpeZA7yLgpwFKdW5JXYfjZTJhxPRSd6MlMCMwDAYDVR0T
AQH/BAIwADATBgNVHSUEDDAKBggrBgEFBQcDAjAKBggqhkjOPQQDAgNHADBEAiBL
RPGMZDA+AnkX3RWYb9J+wsrm4jEu23SiIO29gK6ULAIgAKScd7Ml7EIy5TM3I5/W
Tnc5yYCnnGpp8g0cQADLa/s=
-----END CERTIFICATE-----
";

    /// The subject reads most specific first, as Java's `X500Principal.getName()`; the
    /// principal mapper then sees what Kafka's sees.
    #[test]
    fn subject_is_in_rfc2253_order() {
        let der = CertificateDer::from_pem_slice(ALICE.as_bytes()).expect("PEM");
        let dn = subject(&der).expect("subject");
        assert_eq!(dn, "CN=alice,OU=clients,O=Sluice Test");
        let mapper = PrincipalMapper::parse("RULE:^CN=([^,]*),OU=clients.*$/$1/U").expect("rule");
        assert_eq!(mapper.name(&dn).expect("maps"), "ALICE");
        assert!(subject(b"not a certificate").is_err());
    }

    fn config(pairs: &[(&str, &str)]) -> BrokerConfig {
        let mut c = BrokerConfig::default();
        c.set_all(pairs.iter().copied()).expect("valid keys");
        c
    }

    /// Start-up refuses an SSL listener without keys, an unknown suite, and client
    /// authentication without a trust store, naming the key.
    #[test]
    fn missing_or_bad_keys_name_the_key() {
        let err = ListenerTls::new(&config(&[]), "SSL")
            .err()
            .expect("no key store");
        assert!(err.to_string().contains("ssl.keystore.location"), "{err}");
        let err = ListenerTls::new(
            &config(&[(
                "listener.name.ssl.ssl.keystore.location",
                "/nonexistent.pem",
            )]),
            "SSL",
        )
        .err()
        .expect("no file");
        assert!(
            err.to_string()
                .contains("listener.name.ssl.ssl.keystore.location"),
            "{err}"
        );
        let inline = [
            ("ssl.keystore.certificate.chain", ALICE),
            ("ssl.keystore.key", "junk"),
        ];
        let err = ListenerTls::new(&config(&inline), "SSL")
            .err()
            .expect("no key");
        assert!(err.to_string().contains("ssl.keystore.key"), "{err}");
        let c = config(&[("ssl.cipher.suites", "TLS_NOPE")]);
        assert!(crypto_provider(&c, "SSL").is_err());
        let c = config(&[("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256")]);
        assert_eq!(
            crypto_provider(&c, "SSL")
                .expect("suite")
                .cipher_suites
                .len(),
            1
        );
        assert!(trust_store(&config(&[]), "SSL").expect("none").is_none());
        let c = config(&[("ssl.client.auth", "required")]);
        assert_eq!(client_auth(&c, "SSL"), "required");
        assert_eq!(
            client_auth(&c, "SASL_SSL"),
            "none",
            "KIP-684: prefixed only"
        );
        let c = config(&[("listener.name.sasl_ssl.ssl.client.auth", "requested")]);
        assert_eq!(client_auth(&c, "SASL_SSL"), "requested");
        let c = config(&[("ssl.truststore.certificates", ALICE)]);
        assert!(trust_store(&c, "SSL").expect("PEM").is_some());
    }
}
