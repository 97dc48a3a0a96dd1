//! The client side of TLS, for the broker's own connections: to other brokers' inter-broker
//! listener (`inter.broker.listener.name`) and to the other voters (`controller.listener.names`).
//! As Kafka, the client side takes the listener's own keys (`listener.name.<l>.ssl.*`, else
//! `ssl.*`):
//!
//! - the trust store (`ssl.truststore.*`, PEM) verifies the peer's certificate chain; it is
//!   required (Sluice has no system trust store);
//! - the key store (`ssl.keystore.*`), when set, is the client certificate (mTLS: the peer's
//!   `ssl.client.auth=required` needs it);
//! - `ssl.endpoint.identification.algorithm`: `https` (default) checks that the certificate
//!   names the host connected to (a DNS name, or an IP address SAN for an IP literal); empty
//!   disables that check (the chain is still verified);
//! - `ssl.enabled.protocols` and `ssl.cipher.suites` as on the server side.
//!
//! The handshake is async on the shard, bounded by [`super::TLS_HANDSHAKE_TIMEOUT`].

use std::sync::Arc;

use futures_lite::{AsyncRead, AsyncWrite};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tuning::config::BrokerConfig;

use super::error::TlsConfigError;
use super::settings::{
    crypto_provider, key_pair, listener_key, protocol_versions, trust_store, TLS_HANDSHAKE_TIMEOUT,
};

/// A TLS client stream to a peer.
pub type PeerTlsStream<S> = futures_rustls::client::TlsStream<S>;

/// The client side of TLS towards one listener of other nodes: shared by every shard
/// (immutable once built).
#[derive(Clone)]
pub struct PeerTls {
    connector: futures_rustls::TlsConnector,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerTls")
    }
}

impl PeerTls {
    /// The client side of listener `listener`'s TLS, from `config`. Blocking (reads key
    /// files): call at start-up.
    ///
    /// # Errors
    /// [`TlsConfigError`] naming the key at fault (no trust store, a bad key store, an
    /// unknown `ssl.endpoint.identification.algorithm`, …).
    pub fn new(config: &BrokerConfig, listener: &str) -> Result<PeerTls, TlsConfigError> {
        let provider = Arc::new(crypto_provider(config, listener)?);
        let versions = protocol_versions(config, listener)?;
        let roots = trust_store(config, listener)?.ok_or_else(|| TlsConfigError::Invalid {
            key: format!(
                "listener.name.{}.ssl.truststore.location",
                listener.to_ascii_lowercase()
            ),
            why: format!(
                "this broker connects to other nodes' listener {listener} over TLS: set \
                 ssl.truststore.location or ssl.truststore.certificates (PEM) to verify them"
            ),
        })?;
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| TlsConfigError::Invalid {
                key: listener_key(config, listener, "ssl.truststore.certificates"),
                why: e.to_string(),
            })?;
        let algorithm = config
            .listener_property(listener, "ssl.endpoint.identification.algorithm")
            .unwrap_or("https")
            .trim();
        let verifier: Arc<dyn ServerCertVerifier> = if algorithm.is_empty() {
            Arc::new(WithoutHostname(webpki))
        } else if algorithm.eq_ignore_ascii_case("https") {
            webpki
        } else {
            return Err(TlsConfigError::Invalid {
                key: listener_key(config, listener, "ssl.endpoint.identification.algorithm"),
                why: format!("unsupported algorithm {algorithm}: https or empty"),
            });
        };
        let rustls_error = |source| TlsConfigError::Rustls {
            listener: listener.to_owned(),
            source,
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(rustls_error)?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let client = match key_pair(config, listener)? {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(rustls_error)?,
            None => builder.with_no_client_auth(),
        };
        Ok(PeerTls {
            connector: futures_rustls::TlsConnector::from(Arc::new(client)),
        })
    }

    /// Runs the client handshake on `stream`, a connection to `host` (a name or an IP
    /// literal, checked against the peer's certificate), within [`TLS_HANDSHAKE_TIMEOUT`].
    ///
    /// # Errors
    /// `host` is no valid server name, the handshake failed (the peer's certificate is not
    /// trusted or does not name `host`, the peer refused ours) or timed out.
    pub async fn connect<S>(&self, host: &str, stream: S) -> std::io::Result<PeerTlsStream<S>>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let name = ServerName::try_from(host.to_owned()).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{host} is no TLS server name: {e}"),
            )
        })?;
        let handshake = async { Some(self.connector.connect(name, stream).await) };
        let timeout = async {
            crate::rt::sleep(TLS_HANDSHAKE_TIMEOUT).await;
            None
        };
        futures_lite::future::or(handshake, timeout)
            .await
            .unwrap_or_else(|| {
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("TLS handshake not finished within {TLS_HANDSHAKE_TIMEOUT:?}"),
                ))
            })
    }
}

/// The WebPKI verifier without its host name check
/// (`ssl.endpoint.identification.algorithm` empty): the chain, validity and signatures are
/// still verified.
#[derive(Debug)]
struct WithoutHostname(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for WithoutHostname {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The WebPKI verifier checks the name last, after the chain: a name mismatch means
        // everything else held.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
