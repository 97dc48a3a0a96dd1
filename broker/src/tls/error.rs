//! [`TlsConfigError`]: why a TLS listener's settings cannot be used.

use super::principal::MappingRulesError;

/// Why a TLS listener's settings cannot be used (the broker does not start).
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// A `*.location` file cannot be read.
    #[error("{key}: cannot read {path}: {source}")]
    Read {
        key: String,
        path: String,
        source: std::io::Error,
    },
    /// A key's value is missing or unusable.
    #[error("{key}: {why}")]
    Invalid { key: String, why: String },
    /// `ssl.principal.mapping.rules` does not parse.
    #[error("ssl.principal.mapping.rules: {0}")]
    Rules(#[from] MappingRulesError),
    /// rustls refuses the combination (e.g. no cipher suite for an enabled protocol, or a key
    /// that does not match the certificate).
    #[error("listener {listener}: {source}")]
    Rustls {
        listener: String,
        source: rustls::Error,
    },
}
