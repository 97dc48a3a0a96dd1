//! Fetching a JWKS (RFC 7517 key set) for the JWKS validator: from a `file:` URL once at
//! start (as Kafka's `JwksFileVerificationKeyResolver`), or from an `http://` or `https://`
//! URL at start and then on a thread of its own every
//! `sasl.oauthbearer.jwks.endpoint.refresh.ms`, and sooner when a token names a key id the set
//! lacks (as Kafka's `RefreshingHttpsJwks`). The thread does the blocking I/O, never a shard:
//! a shard only reads the current set and, on an unknown key id, nudges the thread.
//!
//! The HTTP client is the least a JWKS endpoint needs: one `GET` per fetch over HTTP/1.1 with
//! `Connection: close`, a body of at most [`JWKS_MAX_BYTES`] (by `Content-Length`, chunked, or
//! up to the close); `https://` through rustls, trusting the system's CA bundle.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;

/// Largest JWKS document read, bytes.
pub const JWKS_MAX_BYTES: usize = 1 << 20;

/// How long a fetch may take to connect, and to wait for each read, before it fails.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Fewest time between two fetches the validator asked for (a client sending tokens with
/// made-up key ids must not turn the thread into a flood of requests).
const EXPEDITED_INTERVAL_MIN: Duration = Duration::from_secs(1);

/// Where the system's CA certificates are (Debian's bundle), for `https://` endpoints.
const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Why a JWKS could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL is not `file:`, `http://` or `https://`, or names no host.
    #[error("unsupported JWKS endpoint URL {0} (file:, http:// or https:// only)")]
    BadUrl(String),
    /// The file or the socket failed.
    #[error("{url}: {source}")]
    Io {
        url: String,
        #[source]
        source: std::io::Error,
    },
    /// TLS could not be set up.
    #[error("{url}: TLS: {why}")]
    Tls { url: String, why: String },
    /// The server answered something other than a 200 with a body in bounds.
    #[error("{url}: {why}")]
    Http { url: String, why: String },
    /// The body is not a JWKS.
    #[error("{url}: not a JWKS: {source}")]
    NotJwks {
        url: String,
        #[source]
        source: serde_json::Error,
    },
}

/// The key set at `url` (blocking: call it off the shards).
///
/// # Errors
/// [`FetchError`] saying what failed.
pub fn fetch(url: &str) -> Result<JwkSet, FetchError> {
    let body = if let Some(path) = url.strip_prefix("file:") {
        // file:/p, file:///p
        let path = path.strip_prefix("//").unwrap_or(path);
        std::fs::read(path).map_err(|source| FetchError::Io {
            url: url.to_owned(),
            source,
        })?
    } else {
        http_get(url)?
    };
    serde_json::from_slice(&body).map_err(|source| FetchError::NotJwks {
        url: url.to_owned(),
        source,
    })
}

/// Starts the thread that refreshes `keys` from `url` every `refresh`, and at once (at most
/// every [`EXPEDITED_INTERVAL_MIN`]) when the returned sender is nudged. The thread ends with
/// the process.
///
/// # Errors
/// The OS's error when the thread cannot start.
pub fn spawn_refresher(
    url: String,
    refresh: Duration,
    keys: Arc<RwLock<JwkSet>>,
) -> std::io::Result<SyncSender<()>> {
    let (nudge, nudged) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("sluice-jwks".into())
        .spawn(move || refresh_loop(&url, refresh, &keys, &nudged))?;
    Ok(nudge)
}

fn refresh_loop(url: &str, refresh: Duration, keys: &RwLock<JwkSet>, nudged: &Receiver<()>) {
    let mut last = Instant::now();
    loop {
        match nudged.recv_timeout(refresh) {
            Ok(()) => {
                let since = last.elapsed();
                if since < EXPEDITED_INTERVAL_MIN {
                    std::thread::sleep(EXPEDITED_INTERVAL_MIN - since);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        last = Instant::now();
        match fetch(url) {
            Ok(set) => {
                tracing::debug!(url, keys = set.keys.len(), "JWKS refreshed");
                if let Ok(mut current) = keys.write() {
                    *current = set;
                }
            }
            Err(e) => tracing::warn!(error = %e, "JWKS refresh failed; keeping the previous keys"),
        }
    }
}

/// An `http://` or `https://` URL's parts.
struct Url<'a> {
    tls: bool,
    host: &'a str,
    port: u16,
    path: &'a str,
}

fn parse_url(url: &str) -> Option<Url<'_>> {
    let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else {
        (false, url.strip_prefix("http://")?)
    };
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
    let default_port = if tls { 443 } else { 80 };
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        // An IPv6 address: [addr] or [addr]:port.
        let (host, after) = bracketed.split_once(']')?;
        match after.strip_prefix(':') {
            Some(p) => (host, p.parse().ok()?),
            None if after.is_empty() => (host, default_port),
            None => return None,
        }
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, p.parse().ok()?),
            None => (authority, default_port),
        }
    };
    (!host.is_empty()).then_some(Url {
        tls,
        host,
        port,
        path,
    })
}

/// The body of a `GET url`.
fn http_get(url: &str) -> Result<Vec<u8>, FetchError> {
    let parts = parse_url(url).ok_or_else(|| FetchError::BadUrl(url.to_owned()))?;
    let io = |source| FetchError::Io {
        url: url.to_owned(),
        source,
    };
    let addr = (parts.host, parts.port)
        .to_socket_addrs()
        .map_err(io)?
        .next()
        .ok_or_else(|| FetchError::BadUrl(url.to_owned()))?;
    let tcp = TcpStream::connect_timeout(&addr, FETCH_TIMEOUT).map_err(io)?;
    tcp.set_read_timeout(Some(FETCH_TIMEOUT)).map_err(io)?;
    tcp.set_write_timeout(Some(FETCH_TIMEOUT)).map_err(io)?;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
        parts.path, parts.host
    );
    let response = if parts.tls {
        let mut stream = tls_stream(url, parts.host, tcp)?;
        exchange(&mut stream, request.as_bytes()).map_err(io)?
    } else {
        let mut stream = tcp;
        exchange(&mut stream, request.as_bytes()).map_err(io)?
    };
    response_body(&response).map_err(|why| FetchError::Http {
        url: url.to_owned(),
        why,
    })
}

/// Sends `request` and reads the response to the close, at most [`JWKS_MAX_BYTES`] plus
/// headers.
fn exchange<S: Read + Write>(stream: &mut S, request: &[u8]) -> std::io::Result<Vec<u8>> {
    /// Room for the status line and headers beyond the body.
    const HEADERS_MAX_BYTES: usize = 64 << 10;
    stream.write_all(request)?;
    stream.flush()?;
    let mut response = Vec::new();
    let limit = u64::try_from(JWKS_MAX_BYTES + HEADERS_MAX_BYTES).unwrap_or(u64::MAX);
    Read::by_ref(stream)
        .take(limit)
        .read_to_end(&mut response)?;
    Ok(response)
}

/// A TLS client stream to `host` over `tcp`, trusting the system's CA bundle.
fn tls_stream(
    url: &str,
    host: &str,
    tcp: TcpStream,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, FetchError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, ServerName};
    let tls = |why: String| FetchError::Tls {
        url: url.to_owned(),
        why,
    };
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(SYSTEM_CA_BUNDLE)
        .map_err(|e| tls(format!("{SYSTEM_CA_BUNDLE}: {e}")))?;
    for cert in certs.flatten() {
        // A certificate the store rejects is skipped, as a browser skips it.
        let _ = roots.add(cert);
    }
    // The ring provider, as the listeners' (crate::tls says why despite its deprecation).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_owned()).map_err(|e| tls(e.to_string()))?;
    let connection =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| tls(e.to_string()))?;
    Ok(rustls::StreamOwned::new(connection, tcp))
}

/// The body of an HTTP/1.x response, if its status is 200.
fn response_body(response: &[u8]) -> Result<Vec<u8>, String> {
    let end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = std::str::from_utf8(&response[..end]).map_err(|_| "headers are not UTF-8")?;
    let body = &response[end + 4..];
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let code = status.split(' ').nth(1).unwrap_or_default();
    if code != "200" {
        return Err(format!("answered {status}"));
    }
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        } else if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().map_err(|_| "bad Content-Length")?);
        }
    }
    if chunked {
        return dechunk(body);
    }
    match length {
        Some(n) if n > JWKS_MAX_BYTES => Err(format!("body of {n} bytes exceeds {JWKS_MAX_BYTES}")),
        Some(n) => body
            .get(..n)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| "body shorter than its Content-Length".to_owned()),
        None if body.len() > JWKS_MAX_BYTES => Err(format!("body exceeds {JWKS_MAX_BYTES} bytes")),
        None => Ok(body.to_vec()),
    }
}

/// A chunked body's bytes (RFC 9112 §7.1; extensions and trailers ignored).
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk size")?;
        let line = std::str::from_utf8(&rest[..line_end]).map_err(|_| "bad chunk size")?;
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| "bad chunk size")?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if out.len() + size > JWKS_MAX_BYTES {
            return Err(format!("body exceeds {JWKS_MAX_BYTES} bytes"));
        }
        let chunk = rest.get(..size).ok_or("truncated chunk")?;
        out.extend_from_slice(chunk);
        rest = rest.get(size + 2..).ok_or("truncated chunk")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_bodies() {
        let u = parse_url("http://127.0.0.1:8080/jwks.json").expect("url");
        assert_eq!(
            (u.tls, u.host, u.port, u.path),
            (false, "127.0.0.1", 8080, "/jwks.json")
        );
        let u = parse_url("https://idp.example").expect("url");
        assert_eq!(
            (u.tls, u.host, u.port, u.path),
            (true, "idp.example", 443, "/")
        );
        let u = parse_url("http://[::1]:9000/k").expect("url");
        assert_eq!((u.host, u.port), ("::1", 9000));
        assert!(parse_url("ftp://x/").is_none());
        assert!(parse_url("http://:80/").is_none());

        let ok = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}junk";
        assert_eq!(response_body(ok).expect("200"), b"{}");
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{\"\r\n3;x=y\r\nk\"}\r\n0\r\n\r\n";
        assert_eq!(response_body(chunked).expect("chunked"), b"{\"k\"}");
        let closed = b"HTTP/1.1 200 OK\r\n\r\n{\"keys\":[]}";
        assert_eq!(response_body(closed).expect("to close"), b"{\"keys\":[]}");
        assert!(response_body(b"HTTP/1.1 404 Not Found\r\n\r\n").is_err());
        assert!(response_body(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").is_err());
        assert!(
            response_body(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
        assert!(response_body(b"garbage").is_err());
    }
}
