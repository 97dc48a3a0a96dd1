//! The settings a TLS side is built from, shared by the server side (`super::ListenerTls`)
//! and the client side (`super::client`): the key and trust stores, the protocols, the
//! cipher suites, `ssl.client.auth`, each as set for one listener.

use std::time::Duration;

use rustls::{RootCertStore, SupportedProtocolVersion};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tuning::config::BrokerConfig;

use super::error::TlsConfigError;
use super::keys;

/// Longest a client may take over its TLS handshake before the connection is closed (bounds
/// what a client that stops mid-handshake holds).
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The name of `key` as set for `listener`: its per-listener form when that is set.
pub(super) fn listener_key(config: &BrokerConfig, listener: &str, key: &str) -> String {
    let prefixed = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
    if config.security_properties.contains_key(&prefixed) {
        prefixed
    } else {
        key.to_owned()
    }
}

/// `ssl.client.auth` for `listener` (default `none`). On a SASL_SSL listener only its
/// `listener.name.<l>.ssl.client.auth` counts, the broker-wide key being for SSL listeners
/// (KIP-684), as in Kafka.
pub(super) fn client_auth<'c>(config: &'c BrokerConfig, listener: &str) -> &'c str {
    let sasl = config
        .listener_protocol(listener)
        .is_some_and(|p| p.uses_sasl());
    let value = if sasl {
        let prefixed = format!(
            "listener.name.{}.ssl.client.auth",
            listener.to_ascii_lowercase()
        );
        config
            .security_properties
            .get(&prefixed)
            .map(String::as_str)
    } else {
        config.listener_property(listener, "ssl.client.auth")
    };
    value.unwrap_or("none")
}

/// rustls's ring provider with only the suites of `ssl.cipher.suites`, when set.
pub(super) fn crypto_provider(
    config: &BrokerConfig,
    listener: &str,
) -> Result<rustls::crypto::CryptoProvider, TlsConfigError> {
    // rustls 0.23.48 deprecates the ring provider for lacking post-quantum key exchange
    // (aws-lc-rs has it, at the cost of a CMake and C build of aws-lc in every build). Kafka 4.4
    // on Java 17/21 offers no post-quantum group either; revisit with the next rustls.
    #[allow(deprecated)]
    let mut provider = rustls::crypto::ring::default_provider();
    let Some(wanted) = config
        .listener_property(listener, "ssl.cipher.suites")
        .filter(|v| !v.trim().is_empty())
    else {
        return Ok(provider);
    };
    let mut suites = Vec::new();
    for name in wanted.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        // Java names TLS 1.3 suites TLS_AES_…; rustls TLS13_AES_….
        let tls13 = name
            .strip_prefix("TLS_")
            .map(|rest| format!("TLS13_{rest}"));
        let suite = provider.cipher_suites.iter().find(|s| {
            let known = s.suite().as_str();
            known == Some(name) || known.is_some_and(|k| tls13.as_deref() == Some(k))
        });
        match suite {
            Some(s) => suites.push(*s),
            None => {
                return Err(TlsConfigError::Invalid {
                    key: listener_key(config, listener, "ssl.cipher.suites"),
                    why: format!("unsupported cipher suite {name}"),
                })
            }
        }
    }
    provider.cipher_suites = suites;
    Ok(provider)
}

/// The TLS versions of `ssl.enabled.protocols` (default TLSv1.2 and TLSv1.3).
pub(super) fn protocol_versions(
    config: &BrokerConfig,
    listener: &str,
) -> Result<Vec<&'static SupportedProtocolVersion>, TlsConfigError> {
    let enabled = config
        .listener_property(listener, "ssl.enabled.protocols")
        .unwrap_or("TLSv1.2,TLSv1.3");
    let mut versions = Vec::new();
    for name in enabled.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        versions.push(match name {
            "TLSv1.2" => &rustls::version::TLS12,
            "TLSv1.3" => &rustls::version::TLS13,
            other => {
                return Err(TlsConfigError::Invalid {
                    key: listener_key(config, listener, "ssl.enabled.protocols"),
                    why: format!("unsupported protocol {other}"),
                })
            }
        });
    }
    if versions.is_empty() {
        return Err(TlsConfigError::Invalid {
            key: listener_key(config, listener, "ssl.enabled.protocols"),
            why: "no protocol enabled".to_owned(),
        });
    }
    Ok(versions)
}

/// Listener `listener`'s key store: its certificate chain and private key (`None`: no
/// `ssl.keystore.*` is set). Blocking (reads key files).
pub(super) fn key_pair(
    config: &BrokerConfig,
    listener: &str,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, TlsConfigError> {
    let get = |key: &str| {
        config
            .listener_property(listener, key)
            .map(|v| (listener_key(config, listener, key), v))
    };
    let Some(keystore) = keys::Source::pick(
        get("ssl.keystore.certificate.chain"),
        get("ssl.keystore.location"),
    )?
    else {
        return Ok(None);
    };
    let chain = keys::certificates(&keystore)?;
    let key_source = match get("ssl.keystore.key") {
        Some(inline) => keys::Source::pick(Some(inline), None)?.unwrap_or(keystore),
        None => keystore,
    };
    let password = config.listener_property(listener, "ssl.key.password");
    let key = keys::private_key(&key_source, password)?;
    Ok(Some((chain, key)))
}

/// Listener `listener`'s trust store (`None`: no `ssl.truststore.*` is set): it vouches for
/// client certificates on the server side and for the peer's certificate on the client side.
pub(super) fn trust_store(
    config: &BrokerConfig,
    listener: &str,
) -> Result<Option<RootCertStore>, TlsConfigError> {
    let get = |key: &str| {
        config
            .listener_property(listener, key)
            .map(|v| (listener_key(config, listener, key), v))
    };
    let Some(source) = keys::Source::pick(
        get("ssl.truststore.certificates"),
        get("ssl.truststore.location"),
    )?
    else {
        return Ok(None);
    };
    let mut roots = RootCertStore::empty();
    for cert in keys::certificates(&source)? {
        roots.add(cert).map_err(|e| TlsConfigError::Invalid {
            key: source.key.clone(),
            why: e.to_string(),
        })?;
    }
    Ok(Some(roots))
}
