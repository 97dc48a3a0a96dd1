//! Admin HTTP endpoint: a minimal HTTP/1.1 server for health checks and status.
//!
//! Routes (`GET` only; a query string is ignored):
//! - `GET /health` → `200 {"status":"ok"}` while the admin task runs.
//! - `GET /v1/status` → `200` with the JSON the broker's [`AdminSource`] returns.
//! - `GET /metrics` → `200` with the Prometheus text the broker's [`AdminSource`] returns.
//! - another path → `404`; another method on a known path → `405`; a request that is not
//!   HTTP/1.x → `400`; a request head over [`REQUEST_HEAD_BYTES_MAX`] → `431`.
//!
//! Every response carries `Connection: close` and the connection is closed after it: one
//! request per connection, so no request body or pipelining ever needs framing.
//!
//! Runs on one executor (shard 0): [`serve`] takes the connections of the admin listener,
//! bound before the executors started ([`crate::listener`]: bound without `SO_REUSEPORT`,
//! refused at start-up when another process listens there).
//!
//! Limits: one task per connection, at most [`CONNECTIONS_MAX`] at once (more are closed on
//! accept); each read and write times out after [`IO_TIMEOUT`]. Input never panics: every
//! malformed request is an error response.

use std::cell::Cell;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use crate::listener::Incoming;
use crate::rt::TcpStream;
use futures_lite::{AsyncReadExt, AsyncWriteExt};

/// Largest request head (request line + headers) accepted, in bytes.
pub const REQUEST_HEAD_BYTES_MAX: usize = 8 << 10;

/// Most admin connections served at once; further connections are closed on accept.
pub const CONNECTIONS_MAX: usize = 64;

/// Read and write timeout per connection (a stalled client cannot hold a slot forever).
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A future on the admin executor.
pub type LocalFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T>>>;

/// What the broker serves on the admin port; called on the admin executor per request and
/// must not block (it may await, e.g. to gather from every shard).
pub trait AdminSource {
    /// The body of `GET /v1/status`.
    fn status(&self) -> LocalFuture<serde_json::Value>;
    /// The body of `GET /metrics`, Prometheus text format.
    fn metrics(&self) -> LocalFuture<String>;
}

/// Shared handle to the broker's [`AdminSource`].
pub type StatusFn = Rc<dyn AdminSource>;

/// Serves admin HTTP on the connections of `incoming` until the executor stops or the
/// listener is closed. Spawn it: `crate::rt::spawn_local(admin::serve(incoming, status)).detach()`.
pub async fn serve(mut incoming: Incoming, status: StatusFn) {
    let open = Rc::new(Cell::new(0_usize));
    loop {
        let stream = match incoming.accept().await {
            Ok(stream) => stream,
            Err(e) => {
                tracing::debug!(error = %e, "admin: the listener is closed");
                return;
            }
        };
        if open.get() >= CONNECTIONS_MAX {
            tracing::warn!(
                limit = CONNECTIONS_MAX,
                "admin: too many connections, closing one"
            );
            drop(stream);
            continue;
        }
        open.set(open.get() + 1);
        let open = Rc::clone(&open);
        let status = Rc::clone(&status);
        crate::rt::spawn_local(async move {
            if let Err(e) = handle_connection(stream, &status).await {
                tracing::debug!(error = %e, "admin: connection ended with an error");
            }
            open.set(open.get() - 1);
        })
        .detach();
    }
}

async fn handle_connection(mut stream: TcpStream, status: &StatusFn) -> io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let response = match read_head(&mut stream).await? {
        Some(head) => match parse_request(&head) {
            Ok(request) => route(&request, status).await,
            Err(why) => Response::error(400, "Bad Request", why),
        },
        None => Response::error(
            431,
            "Request Header Fields Too Large",
            "request head over 8 KiB",
        ),
    };
    stream.write_all(&response.to_bytes()).await?;
    stream.flush().await?;
    stream.close().await
}

/// Reads until the end of the request head (a blank line). `Ok(None)` if the head exceeds
/// [`REQUEST_HEAD_BYTES_MAX`]; an error if the peer closes first or a read times out.
async fn read_head(stream: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0_u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed before the end of the request head",
            ));
        }
        // Only the new bytes (plus 3 before, for a split terminator) need scanning.
        let scan_from = head.len().saturating_sub(3);
        head.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(&head[scan_from..]) {
            head.truncate(scan_from + end);
            return Ok(Some(head));
        }
        if head.len() > REQUEST_HEAD_BYTES_MAX {
            return Ok(None);
        }
    }
}

/// Index just past the blank line ending a request head (`\r\n\r\n`, or `\n\n` from lenient
/// clients), if present.
pub fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The parts of a request the router needs.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: &'a str,
    /// Path without the query string.
    pub path: &'a str,
}

/// Parses a request head: `METHOD SP TARGET SP HTTP/1.x` then `Name: value` header lines.
///
/// # Errors
/// Why the head is refused (answered `400` with it): not UTF-8, a malformed request line,
/// method, target or header line, or an HTTP version other than 1.0 and 1.1.
pub fn parse_request(head: &[u8]) -> Result<Request<'_>, &'static str> {
    let text = std::str::from_utf8(head).map_err(|_| "request head is not UTF-8")?;
    let mut lines = text.lines();
    let request_line = lines.next().ok_or("empty request")?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("malformed request line");
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err("malformed method");
    }
    if !target.starts_with('/') {
        return Err("request target must be an absolute path");
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err("only HTTP/1.0 and HTTP/1.1 are supported");
    }
    for line in lines {
        if line.is_empty() {
            break;
        }
        match line.split_once(':') {
            Some((name, _)) if !name.is_empty() && !name.contains([' ', '\t']) => {}
            _ => return Err("malformed header line"),
        }
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    Ok(Request { method, path })
}

async fn route(request: &Request<'_>, source: &StatusFn) -> Response {
    if !matches!(request.path, "/health" | "/v1/status" | "/metrics") {
        return Response::error(404, "Not Found", "no such path");
    }
    if request.method != "GET" {
        return Response::error(405, "Method Not Allowed", "only GET is supported")
            .with_header("Allow: GET");
    }
    match request.path {
        "/health" => Response::json(200, "OK", &serde_json::json!({ "status": "ok" })),
        "/v1/status" => Response::json(200, "OK", &source.status().await),
        _ => Response::text(source.metrics().await),
    }
}

/// A complete response; always `Connection: close`.
struct Response {
    code: u16,
    reason: &'static str,
    content_type: &'static str,
    extra_header: Option<&'static str>,
    body: Vec<u8>,
}

impl Response {
    fn json(code: u16, reason: &'static str, body: &serde_json::Value) -> Response {
        // Serialising a `Value` to memory cannot fail (no non-string map keys, no I/O).
        let body = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
        Response {
            code,
            reason,
            content_type: "application/json",
            extra_header: None,
            body,
        }
    }

    /// Prometheus text exposition format 0.0.4.
    fn text(body: String) -> Response {
        Response {
            code: 200,
            reason: "OK",
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            extra_header: None,
            body: body.into_bytes(),
        }
    }

    fn error(code: u16, reason: &'static str, why: &str) -> Response {
        Response::json(code, reason, &serde_json::json!({ "error": why }))
    }

    fn with_header(mut self, header: &'static str) -> Response {
        self.extra_header = Some(header);
        self
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             Connection: close\r\n",
            self.code,
            self.reason,
            self.content_type,
            self.body.len()
        );
        if let Some(h) = self.extra_header {
            out.push_str(h);
            out.push_str("\r\n");
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rt::LocalExecutorBuilder;

    #[test]
    fn parses_requests() {
        assert_eq!(
            parse_request(b"GET /health?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"),
            Ok(Request {
                method: "GET",
                path: "/health"
            })
        );
        assert!(parse_request(b"GET /health HTTP/1.0\n\n").is_ok());
        for bad in [
            &b""[..],
            b"\r\n\r\n",
            b"GET /health\r\n\r\n",
            b"GET /health HTTP/2\r\n\r\n",
            b"GET health HTTP/1.1\r\n\r\n",
            b"get /health HTTP/1.1\r\n\r\n",
            b"GET  /health HTTP/1.1\r\n\r\n",
            b"GET /health HTTP/1.1 x\r\n\r\n",
            b"GET /health HTTP/1.1\r\nno colon\r\n\r\n",
            b"GET /health HTTP/1.1\r\n: empty name\r\n\r\n",
            b"GET /\xff HTTP/1.1\r\n\r\n",
        ] {
            assert!(
                parse_request(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(head_end(b"a\r\n\r\nb"), Some(5));
        assert_eq!(head_end(b"a\n\nb"), Some(3));
        assert_eq!(head_end(b"a\r\n"), None);
    }

    /// Sends `request` raw and returns the whole response as text.
    async fn exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        // The server may close early (oversized head); a failed write is then expected.
        let _ = stream.write_all(request).await;
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response).await;
        String::from_utf8_lossy(&response).into_owned()
    }

    fn status_line(response: &str) -> &str {
        response.lines().next().unwrap_or("")
    }

    fn body(response: &str) -> &str {
        response.split_once("\r\n\r\n").map_or("", |(_, b)| b)
    }

    struct Fixed;

    impl AdminSource for Fixed {
        fn status(&self) -> LocalFuture<serde_json::Value> {
            Box::pin(async { serde_json::json!({ "shards": 2 }) })
        }
        fn metrics(&self) -> LocalFuture<String> {
            Box::pin(async { "sluice_up 1\n".to_string() })
        }
    }

    #[test]
    fn serves_over_tcp() {
        let handle = LocalExecutorBuilder::default()
            .spawn(|| async move {
                let bound = crate::listener::bind(
                    "admin listener",
                    "127.0.0.1:0".parse().expect("literal"),
                )
                .expect("bind");
                let addr = bound.local_addr();
                let (_closer, mut handoffs) = bound.serve(1).expect("accept thread");
                let incoming = handoffs.pop().expect("one handoff").incoming();
                let status: StatusFn = Rc::new(Fixed);
                crate::rt::spawn_local(serve(incoming, status)).detach();

                let r = exchange(addr, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").await;
                assert_eq!(status_line(&r), "HTTP/1.1 200 OK", "{r}");
                assert!(r.contains("Connection: close"), "{r}");
                assert!(r.contains("Content-Length: 15\r\n"), "{r}");
                assert_eq!(body(&r), r#"{"status":"ok"}"#);

                let r = exchange(addr, b"GET /v1/status HTTP/1.1\r\n\r\n").await;
                assert_eq!(status_line(&r), "HTTP/1.1 200 OK", "{r}");
                assert_eq!(body(&r), r#"{"shards":2}"#);

                let r = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n").await;
                assert_eq!(status_line(&r), "HTTP/1.1 200 OK", "{r}");
                assert!(r.contains("Content-Type: text/plain; version=0.0.4"), "{r}");
                assert_eq!(body(&r), "sluice_up 1\n");

                let r = exchange(addr, b"GET /nope HTTP/1.1\r\n\r\n").await;
                assert_eq!(status_line(&r), "HTTP/1.1 404 Not Found", "{r}");

                let r = exchange(addr, b"POST /health HTTP/1.1\r\n\r\n").await;
                assert_eq!(status_line(&r), "HTTP/1.1 405 Method Not Allowed", "{r}");
                assert!(r.contains("Allow: GET\r\n"), "{r}");

                let r = exchange(addr, b"\x00\x01\x02 garbage\r\n\r\n").await;
                assert_eq!(status_line(&r), "HTTP/1.1 400 Bad Request", "{r}");

                let mut huge = b"GET /health HTTP/1.1\r\nX: ".to_vec();
                huge.resize(REQUEST_HEAD_BYTES_MAX + 100, b'a');
                let r = exchange(addr, &huge).await;
                assert_eq!(
                    status_line(&r),
                    "HTTP/1.1 431 Request Header Fields Too Large",
                    "{r}"
                );

                // A client that connects and leaves without a request must not upset the
                // server; it still answers afterwards.
                drop(TcpStream::connect(addr).await.expect("connect"));
                let r = exchange(addr, b"GET /health HTTP/1.0\r\n\r\n").await;
                assert_eq!(status_line(&r), "HTTP/1.1 200 OK", "{r}");
            })
            .expect("executor starts");
        handle.join().expect("test body ran without panicking");
    }
}
