//! The `connect` scenario: new connections per second. Each of `--connections` connections,
//! one after another, is opened, completes its TLS handshake (when the broker's
//! `security.protocol` from `--client-config` is SSL or SASL_SSL) and one ApiVersions round
//! trip (v3, KIP-511), and is closed (a TLS close_notify first). Every handshake is a full one:
//! the client keeps no session to resume. On a SASL_SSL listener no SASL exchange is made
//! (Kafka answers ApiVersions before SaslHandshake), so the figure is the TLS cost alone.
//!
//! The client is rustls (ring), trusting the PEM certificates of `ssl.ca.location`, the
//! server name checked against the bootstrap host as librdkafka's default
//! `ssl.endpoint.identification.algorithm=https` does. The broker's CPU per connection comes
//! from the broker's process (`--bootstrap-pid` / `--compare-pid`, or the local broker).

use crate::client::Endpoint;
use crate::procstat;
use anyhow::{bail, Context as _};
use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde::Serialize;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections opened per broker unless `--connections` says otherwise.
pub const DEFAULT_CONNECTIONS: u32 = 1_000;
/// The ApiVersions version sent (KIP-511: flexible, with the client's software name).
const API_VERSIONS_VERSION: i16 = 3;
/// Largest ApiVersions response accepted, bytes (Kafka's is about 600).
const MAX_RESPONSE_BYTES: usize = 1 << 20;
/// Connect, handshake and round-trip time allowed per connection.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// One broker's connection figures.
#[derive(Debug, Serialize)]
pub struct ConnectResult {
    pub label: String,
    pub bootstrap: String,
    /// The `security.protocol` of `--client-config`: PLAINTEXT, SSL or SASL_SSL (SASL is not
    /// exchanged).
    pub security_protocol: String,
    /// Connections opened, handshaken, answered and closed.
    pub connections: u32,
    pub wall_s: f64,
    pub connections_per_sec: f64,
    /// Mean time from connect() to the ApiVersions answer, milliseconds.
    pub mean_connect_ms: f64,
    /// The broker's CPU time per connection, microseconds (null without the broker's pid).
    pub broker_us_per_connection: Option<f64>,
    /// loadgen's own CPU time per connection, microseconds.
    pub loadgen_us_per_connection: Option<f64>,
}

/// The JSON result of a `connect` run.
#[derive(Debug, Serialize)]
pub struct ConnectFile {
    pub schema: &'static str,
    pub scenario: &'static str,
    pub brokers: Vec<ConnectResult>,
}

/// `ConnectFile::schema`.
pub const SCHEMA: &str = "sluice-loadgen/connect/1";

/// Opens `connections` connections to `endpoint` one after another; `broker_pid` is sampled
/// for CPU time.
///
/// # Errors
/// A connection, handshake or ApiVersions exchange that fails (the run stops at the first).
pub fn run(
    label: &str,
    endpoint: &Endpoint,
    connections: u32,
    broker_pid: Option<u32>,
) -> anyhow::Result<ConnectResult> {
    let security_protocol = endpoint.security_protocol();
    let tls = match security_protocol.as_str() {
        "PLAINTEXT" => None,
        "SSL" | "SASL_SSL" => Some(tls_config(endpoint)?),
        other => {
            bail!("connect: security.protocol {other} is not measured (PLAINTEXT, SSL or SASL_SSL)")
        }
    };
    let host = endpoint
        .bootstrap
        .split(',')
        .next()
        .and_then(|b| b.rsplit_once(':'))
        .map(|(host, _)| {
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_string()
        })
        .with_context(|| format!("connect: {endpoint}: expected HOST:PORT"))?;
    let address = endpoint.bootstrap.split(',').next().unwrap_or_default();
    let server_name = ServerName::try_from(host.clone())
        .with_context(|| format!("connect: {host} is not a TLS server name"))?;
    let broker_cpu_start = broker_pid.and_then(|pid| procstat::cpu_seconds(Some(pid)));
    let loadgen_cpu_start = procstat::cpu_seconds(None);
    let started = Instant::now();
    for n in 0..connections {
        let correlation_id = i32::try_from(n).unwrap_or(i32::MAX);
        let tcp =
            TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
        tcp.set_nodelay(true)?;
        tcp.set_read_timeout(Some(IO_TIMEOUT))?;
        tcp.set_write_timeout(Some(IO_TIMEOUT))?;
        match &tls {
            None => api_versions(tcp, correlation_id),
            Some(config) => {
                let connection = rustls::ClientConnection::new(config.clone(), server_name.clone())
                    .context("starting a TLS client connection")?;
                let mut stream = rustls::StreamOwned::new(connection, tcp);
                api_versions(&mut stream, correlation_id)?;
                stream.conn.send_close_notify();
                // The peer may close first: a failed close_notify write changes nothing.
                let _ = stream.flush();
                Ok(())
            }
        }
        .with_context(|| format!("connection {n} to {address} ({security_protocol})"))?;
    }
    let wall_s = started.elapsed().as_secs_f64();
    let per_connection_us = |start: Option<f64>, end: Option<f64>| {
        start
            .zip(end)
            .filter(|_| connections > 0)
            .map(|(s, e)| (e - s) * 1e6 / f64::from(connections))
    };
    Ok(ConnectResult {
        label: label.to_string(),
        bootstrap: endpoint.bootstrap.clone(),
        connections,
        wall_s,
        connections_per_sec: if wall_s > 0.0 {
            f64::from(connections) / wall_s
        } else {
            0.0
        },
        mean_connect_ms: if connections > 0 {
            wall_s * 1e3 / f64::from(connections)
        } else {
            0.0
        },
        broker_us_per_connection: per_connection_us(
            broker_cpu_start,
            broker_pid.and_then(|pid| procstat::cpu_seconds(Some(pid))),
        ),
        loadgen_us_per_connection: per_connection_us(
            loadgen_cpu_start,
            procstat::cpu_seconds(None),
        ),
        security_protocol,
    })
}

/// A rustls client configuration trusting `ssl.ca.location` (PEM), without session
/// resumption (every handshake is a full one).
fn tls_config(endpoint: &Endpoint) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let ca = endpoint
        .property("ssl.ca.location")
        .context("connect over TLS needs --client-config ssl.ca.location=FILE (PEM)")?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).with_context(|| format!("reading {ca}"))? {
        roots
            .add(cert.with_context(|| format!("a certificate in {ca}"))?)
            .with_context(|| format!("a certificate in {ca}"))?;
    }
    // The ring provider, as the broker's listeners (broker/src/tls says why despite its
    // deprecation).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}

/// Sends ApiVersions and reads its answer, which must carry `correlation_id` and no error.
fn api_versions<S: Read + Write>(mut stream: S, correlation_id: i32) -> anyhow::Result<()> {
    let mut frame = BytesMut::new();
    frame.extend_from_slice(&[0; 4]);
    RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions as i16)
        .with_request_api_version(API_VERSIONS_VERSION)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("sluice-loadgen")))
        .encode(
            &mut frame,
            ApiKey::ApiVersions.request_header_version(API_VERSIONS_VERSION),
        )
        .context("encoding the request header")?;
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("sluice-loadgen"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")))
        .encode(&mut frame, API_VERSIONS_VERSION)
        .context("encoding ApiVersions")?;
    let size = u32::try_from(frame.len() - 4).context("request size")?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    stream.write_all(&frame).context("sending ApiVersions")?;
    stream.flush().context("sending ApiVersions")?;

    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .context("reading the ApiVersions response size")?;
    let size = usize::try_from(u32::from_be_bytes(size)).context("response size")?;
    if size > MAX_RESPONSE_BYTES {
        bail!("a {size}-byte ApiVersions response");
    }
    let mut body = vec![0u8; size];
    stream
        .read_exact(&mut body)
        .context("reading the ApiVersions response")?;
    let mut buf = bytes::Bytes::from(body);
    let header = ResponseHeader::decode(
        &mut buf,
        ApiKey::ApiVersions.response_header_version(API_VERSIONS_VERSION),
    )
    .context("decoding the response header")?;
    if header.correlation_id != correlation_id {
        bail!(
            "correlation id {} answered {correlation_id}",
            header.correlation_id
        );
    }
    let response = ApiVersionsResponse::decode(&mut buf, API_VERSIONS_VERSION)
        .context("decoding ApiVersions")?;
    if response.error_code != 0 {
        bail!("ApiVersions error code {}", response.error_code);
    }
    if buf.has_remaining() {
        bail!("{} bytes after the ApiVersions response", buf.remaining());
    }
    Ok(())
}

/// The table of a `connect` run: one row per broker.
pub fn print_table(file: &ConnectFile) {
    let fmt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
    println!(
        "\nconnect: connect, TLS handshake (full), ApiVersions, close — one connection at a time"
    );
    println!(
        "{:<24} {:>10} {:>8} {:>10} {:>10} {:>16} {:>16}",
        "broker", "security", "conns", "conns/s", "mean ms", "broker µs/conn", "loadgen µs/conn"
    );
    for b in &file.brokers {
        println!(
            "{:<24} {:>10} {:>8} {:>10.1} {:>10.3} {:>16} {:>16}",
            b.label.chars().take(24).collect::<String>(),
            b.security_protocol,
            b.connections,
            b.connections_per_sec,
            b.mean_connect_ms,
            fmt(b.broker_us_per_connection),
            fmt(b.loadgen_us_per_connection),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer that has `reply` ready to read and keeps what is written.
    struct Scripted {
        reply: std::io::Cursor<Vec<u8>>,
        written: Vec<u8>,
    }

    impl Read for Scripted {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reply.read(buf)
        }
    }

    impl Write for Scripted {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.written.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn reply(correlation_id: i32, error_code: i16) -> Scripted {
        let mut body = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(
                &mut body,
                ApiKey::ApiVersions.response_header_version(API_VERSIONS_VERSION),
            )
            .unwrap();
        ApiVersionsResponse::default()
            .with_error_code(error_code)
            .encode(&mut body, API_VERSIONS_VERSION)
            .unwrap();
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        Scripted {
            reply: std::io::Cursor::new(frame),
            written: Vec::new(),
        }
    }

    #[test]
    fn api_versions_sends_a_framed_v3_request_and_accepts_its_answer() {
        let mut peer = reply(7, 0);
        api_versions(&mut peer, 7).unwrap();
        let size = u32::from_be_bytes(peer.written[..4].try_into().unwrap()) as usize;
        assert_eq!(size, peer.written.len() - 4);
        let mut request = bytes::Bytes::from(peer.written[4..].to_vec());
        let header = RequestHeader::decode(
            &mut request,
            ApiKey::ApiVersions.request_header_version(API_VERSIONS_VERSION),
        )
        .unwrap();
        assert_eq!(header.request_api_key, ApiKey::ApiVersions as i16);
        assert_eq!(header.request_api_version, API_VERSIONS_VERSION);
        assert_eq!(header.correlation_id, 7);
        let body = ApiVersionsRequest::decode(&mut request, API_VERSIONS_VERSION).unwrap();
        assert_eq!(body.client_software_name.as_str(), "sluice-loadgen");
    }

    #[test]
    fn a_wrong_correlation_id_an_error_or_a_short_answer_fails() {
        assert!(api_versions(&mut reply(8, 0), 7).is_err());
        assert!(api_versions(&mut reply(7, 35), 7).is_err());
        let mut short = reply(7, 0);
        short.reply.get_mut().truncate(6);
        assert!(api_versions(&mut short, 7).is_err());
    }
}
