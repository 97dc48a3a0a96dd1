//! [`ConfigError`]: why a configuration key, value or file was refused, naming the key.

use super::suggest::closest_key;
use std::path::PathBuf;

/// Why a configuration could not be applied. Every variant names the key (or file) at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The key is not a property Sluice knows; `suggestion` is the closest known key.
    #[error("unknown config key `{key}`{}", did_you_mean(.suggestion))]
    UnknownKey {
        /// The key as given.
        key: String,
        /// Closest known key by edit distance, if one is close enough to be a likely typo.
        suggestion: Option<String>,
    },
    /// The key is known but the value does not parse, is out of range or is not allowed.
    #[error("invalid value `{value}` for config key `{key}`: {why}")]
    InvalidValue {
        /// The key (or command-line flag, e.g. `--listen`) as given.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong and what would be accepted.
        why: String,
    },
    /// The key is Kafka's, for a part of Kafka that Sluice does not have.
    #[error("config key `{key}` is not supported: {why}")]
    Unsupported {
        /// The key as given.
        key: String,
        /// What Sluice lacks, and what to do.
        why: String,
    },
    /// The `--config` file could not be read.
    #[error("cannot read config file {}: {source}", .path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The `--config` file is not valid TOML or holds a value of an unsupported type.
    #[error("config file {}: {why}", .path.display())]
    ParseFile {
        /// The file.
        path: PathBuf,
        /// The parse error, with its line and column where TOML gives them.
        why: String,
    },
    /// A key in the `--config` file was rejected; `source` names the key.
    #[error("config file {}: {source}", .path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// The error for the key.
        #[source]
        source: Box<ConfigError>,
    },
    /// A `--set` argument is not of the form `KEY=VALUE`.
    #[error("--set `{arg}`: expected KEY=VALUE")]
    BadSetArgument {
        /// The argument as given.
        arg: String,
    },
}

fn did_you_mean(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!(" (did you mean `{s}`?)"),
        None => String::new(),
    }
}

impl ConfigError {
    /// The key this error is about, if it is about one key.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { key, .. }
            | ConfigError::InvalidValue { key, .. }
            | ConfigError::Unsupported { key, .. } => Some(key),
            ConfigError::InFile { source, .. } => source.key(),
            ConfigError::ReadFile { .. }
            | ConfigError::ParseFile { .. }
            | ConfigError::BadSetArgument { .. } => None,
        }
    }

    /// Re-labels the key of an `UnknownKey` / `InvalidValue` error, e.g. a topic-level key
    /// reported under the broker-level name the user typed.
    pub fn with_key(self, key: &str) -> ConfigError {
        match self {
            ConfigError::InvalidValue { value, why, .. } => ConfigError::InvalidValue {
                key: key.to_owned(),
                value,
                why,
            },
            ConfigError::UnknownKey { suggestion, .. } => ConfigError::UnknownKey {
                key: key.to_owned(),
                suggestion,
            },
            other => other,
        }
    }
}

pub(super) fn invalid(key: &str, value: &str, why: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        why: why.into(),
    }
}

pub(super) fn unknown(key: &str, known: &[&'static str]) -> ConfigError {
    ConfigError::UnknownKey {
        key: key.to_owned(),
        suggestion: closest_key(key, known).map(str::to_owned),
    }
}
