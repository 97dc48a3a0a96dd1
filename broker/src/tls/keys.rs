//! Kafka's PEM key and trust stores (KIP-651): `ssl.keystore.type=PEM` with the certificate
//! chain and private key inline (`ssl.keystore.certificate.chain`, `ssl.keystore.key`) or in
//! one PEM file (`ssl.keystore.location`); `ssl.truststore.certificates` inline or
//! `ssl.truststore.location`. The key is PKCS#8, encrypted with `ssl.key.password` when set
//! (decrypted by RustCrypto's `pkcs8`); an unencrypted PKCS#1 or SEC1 key is also read.
//!
//! Read once at start-up (blocking file reads, before the executors run).

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::error::TlsConfigError;

/// The PEM label of an encrypted PKCS#8 key.
const ENCRYPTED_KEY_LABEL: &str = "ENCRYPTED PRIVATE KEY";

/// Where a store's PEM text comes from: the inline key's value, or the location key's file.
pub(super) struct Source<'a> {
    /// The key named in errors (`listener.name.x.ssl.keystore.location`, …).
    pub key: String,
    pub text: std::borrow::Cow<'a, str>,
}

impl<'a> Source<'a> {
    /// `inline` (with its key name) if set, else the file named by `location`, else `None`.
    ///
    /// # Errors
    /// [`TlsConfigError::Read`] when the file cannot be read.
    pub(super) fn pick(
        inline: Option<(String, &'a str)>,
        location: Option<(String, &'a str)>,
    ) -> Result<Option<Source<'a>>, TlsConfigError> {
        if let Some((key, text)) = inline {
            return Ok(Some(Source {
                key,
                text: reflow_pem(text).into(),
            }));
        }
        let Some((key, path)) = location else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|source| TlsConfigError::Read {
            key: key.clone(),
            path: path.to_owned(),
            source,
        })?;
        Ok(Some(Source {
            key,
            text: reflow_pem(&text).into(),
        }))
    }
}

/// `text`'s PEM blocks, each with its base64 body on lines of 64 characters: Kafka reads an
/// inline PEM value whatever its line breaks (a `.properties` file joins continued lines, so
/// the body often arrives as one line, or with spaces).
fn reflow_pem(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 64 + 64);
    let mut rest = text;
    while let Some(begin) = rest.find("-----BEGIN ") {
        let after_begin = &rest[begin + "-----BEGIN ".len()..];
        let Some(label_end) = after_begin.find("-----") else {
            break;
        };
        let label = &after_begin[..label_end];
        let body_start = &after_begin[label_end + "-----".len()..];
        let end_marker = format!("-----END {label}-----");
        let Some(body_end) = body_start.find(&end_marker) else {
            break;
        };
        let body: String = body_start[..body_end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        for line in body.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str(&end_marker);
        out.push('\n');
        rest = &body_start[body_end + end_marker.len()..];
    }
    out
}

/// Every certificate of `source`, in order (a chain: leaf first).
///
/// # Errors
/// [`TlsConfigError::Invalid`] when a PEM block is malformed or there is no certificate.
pub(super) fn certificates(
    source: &Source<'_>,
) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let certs = CertificateDer::pem_slice_iter(source.text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(source, format!("bad PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(
            source,
            "no PEM certificate (-----BEGIN CERTIFICATE-----)",
        ));
    }
    Ok(certs)
}

/// The private key of `source`, decrypted with `password` when it is an encrypted PKCS#8 key.
///
/// # Errors
/// [`TlsConfigError::Invalid`] when there is no key, an encrypted key without a password (or
/// with a wrong one), or a malformed one.
pub(super) fn private_key(
    source: &Source<'_>,
    password: Option<&str>,
) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    if let Some(block) = pem_block(&source.text, ENCRYPTED_KEY_LABEL) {
        let Some(password) = password else {
            return Err(invalid(
                source,
                "the key is encrypted: set ssl.key.password",
            ));
        };
        let (_, der) = pkcs8::der::pem::decode_vec(block.as_bytes())
            .map_err(|e| invalid(source, format!("bad PEM key: {e}")))?;
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
            .map_err(|e| invalid(source, format!("bad encrypted PKCS#8 key: {e}")))?;
        let document = info.decrypt(password.as_bytes()).map_err(|e| {
            invalid(
                source,
                format!("cannot decrypt the key with ssl.key.password: {e}"),
            )
        })?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            document.as_bytes().to_vec(),
        )));
    }
    PrivateKeyDer::from_pem_slice(source.text.as_bytes())
        .map_err(|e| invalid(source, format!("no usable PEM private key: {e}")))
}

/// The first PEM block labelled `label` in `text`, markers included.
fn pem_block<'t>(text: &'t str, label: &str) -> Option<&'t str> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)?;
    let stop = text[start..].find(&end)? + start + end.len();
    Some(&text[start..stop])
}

fn invalid(source: &Source<'_>, why: impl Into<String>) -> TlsConfigError {
    TlsConfigError::Invalid {
        key: source.key.clone(),
        why: why.into(),
    }
}
