//! The crate's typed error: every variant names the operation and the file or text at fault.

use std::path::PathBuf;

/// Why a probe could not run or a system file could not be understood.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// A system call or file operation failed.
    #[error("{op} {}", .path.display())]
    Io {
        /// What was being done (`"reading"`, `"creating"`, …).
        op: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A glommio executor or DMA operation failed.
    #[error("{op} {}", .path.display())]
    Glommio {
        /// What was being done.
        op: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// glommio's error, as text (glommio's error type is not `Send`).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A system file's text does not have the expected form.
    #[error("cannot parse {what} `{text}`: {why}")]
    Parse {
        /// What the text should be (`"CPU list"`, …).
        what: &'static str,
        /// The text as read.
        text: String,
        /// What is wrong.
        why: String,
    },
    /// The probe's parameters cannot work (a budget of zero, no free space, …).
    #[error("invalid probe setup: {0}")]
    Setup(String),
}

impl TuneError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TuneError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn glommio(
        op: &'static str,
        path: impl Into<PathBuf>,
        e: impl std::fmt::Display,
    ) -> Self {
        TuneError::Glommio {
            op,
            path: path.into(),
            source: e.to_string().into(),
        }
    }
}
