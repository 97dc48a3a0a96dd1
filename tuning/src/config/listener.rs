//! Listener addresses: `HOST:PORT` as given ([`HostPort`], for advertising) and resolved
//! ([`parse_listen_addr`], for binding); Kafka's listener lists (`NAME://HOST:PORT,…`,
//! [`parse_endpoints`]), the security protocols ([`SecurityProtocol`]) and
//! `listener.security.protocol.map` ([`parse_protocol_map`]).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::str::FromStr;

/// A `HOST:PORT` pair as given, unresolved (an advertised listener is for clients to resolve).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPort {
    /// Host name or IP literal (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl FromStr for HostPort {
    type Err = String;

    /// Parses `host:port`, `[v6]:port`, optionally prefixed by `PLAINTEXT://` (Kafka's listener
    /// syntax). An empty host (`:9092`) is returned as an empty string.
    fn from_str(s: &str) -> Result<HostPort, String> {
        let s = s.trim();
        let rest = match s.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("PLAINTEXT") => rest,
            Some((scheme, _)) => {
                return Err(format!(
                    "listener `{scheme}` is not supported; only PLAINTEXT (or a bare HOST:PORT)"
                ))
            }
            None => s,
        };
        if rest.contains(',') {
            return Err("only one listener is supported".to_owned());
        }
        parse_host_port(rest)
    }
}

/// Kafka's security protocols (`org.apache.kafka.common.security.auth.SecurityProtocol`),
/// with the ids brokers register their endpoints with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// Neither TLS nor SASL (id 0).
    Plaintext,
    /// TLS (id 1).
    Ssl,
    /// SASL over plaintext (id 2).
    SaslPlaintext,
    /// SASL over TLS (id 3).
    SaslSsl,
}

impl SecurityProtocol {
    /// Every protocol, in id order.
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    /// Kafka's name (`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`).
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Kafka's id, as registered in `BrokerRegistrationRequest` endpoints.
    pub fn id(self) -> i16 {
        match self {
            SecurityProtocol::Plaintext => 0,
            SecurityProtocol::Ssl => 1,
            SecurityProtocol::SaslPlaintext => 2,
            SecurityProtocol::SaslSsl => 3,
        }
    }

    /// The protocol named `name` (case-insensitive, as Kafka's `forName`).
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        SecurityProtocol::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    /// Whether connections are wrapped in TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One entry of a listener list (`listeners`, `advertised.listeners`): a listener name
/// (upper case, as Kafka's `ListenerName.normalised`) and its `HOST:PORT` as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerEndpoint {
    /// The listener name, upper case (`PLAINTEXT`, `EXTERNAL`, …).
    pub name: String,
    /// Host (empty: every interface) and port.
    pub host_port: HostPort,
}

impl fmt::Display for ListenerEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.name, self.host_port)
    }
}

/// Parses a listener list: `NAME://HOST:PORT` entries separated by commas (Kafka's
/// `listeners` syntax); a bare `HOST:PORT` entry (Sluice's `--listen` shortcut) is the
/// `PLAINTEXT` listener. Names are upper-cased; each name may appear once.
///
/// # Errors
/// A message naming the bad entry: no `://` where a name is needed, a bad host or port, an
/// empty list, or a listener name given twice (Kafka's "Each listener must have a different
/// name").
pub fn parse_endpoints(s: &str) -> Result<Vec<ListenerEndpoint>, String> {
    let mut out: Vec<ListenerEndpoint> = Vec::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, rest) = match entry.split_once("://") {
            Some((name, rest)) => (name.trim().to_ascii_uppercase(), rest),
            None => ("PLAINTEXT".to_owned(), entry),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("Unable to parse {entry} to a broker endpoint"));
        }
        let host_port = parse_host_port(rest)
            .map_err(|why| format!("Unable to parse {entry} to a broker endpoint: {why}"))?;
        if out.iter().any(|e| e.name == name) {
            return Err(format!(
                "Each listener must have a different name, listeners: {s}"
            ));
        }
        out.push(ListenerEndpoint { name, host_port });
    }
    if out.is_empty() {
        return Err("no listener given".to_owned());
    }
    Ok(out)
}

/// Parses `listener.security.protocol.map`: `NAME:PROTOCOL` pairs separated by commas.
///
/// # Errors
/// A message naming the bad pair or the unknown protocol, or a name mapped twice.
pub fn parse_protocol_map(s: &str) -> Result<Vec<(String, SecurityProtocol)>, String> {
    let mut out: Vec<(String, SecurityProtocol)> = Vec::new();
    for pair in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, protocol) = pair
            .split_once(':')
            .ok_or_else(|| format!("`{pair}` is not NAME:PROTOCOL"))?;
        let name = name.trim().to_ascii_uppercase();
        let protocol = SecurityProtocol::from_name(protocol.trim()).ok_or_else(|| {
            format!(
                "No enum constant org.apache.kafka.common.security.auth.SecurityProtocol.{}",
                protocol.trim()
            )
        })?;
        if out.iter().any(|(n, _)| *n == name) {
            return Err(format!("listener name {name} is mapped twice"));
        }
        out.push((name, protocol));
    }
    Ok(out)
}

/// Kafka's default `listener.security.protocol.map`: each protocol's name to itself.
pub fn default_protocol_map() -> Vec<(String, SecurityProtocol)> {
    SecurityProtocol::ALL
        .into_iter()
        .map(|p| (p.name().to_owned(), p))
        .collect()
}

/// `HOST:PORT` or `[V6]:PORT` without a scheme (empty host allowed).
fn parse_host_port(rest: &str) -> Result<HostPort, String> {
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| "missing `]` after IPv6 address".to_owned())?;
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| "expected HOST:PORT".to_owned())?;
        (host, port)
    } else {
        rest.rsplit_once(':')
            .ok_or_else(|| "expected HOST:PORT".to_owned())?
    };
    if host.contains(':') && !rest.starts_with('[') {
        return Err("write an IPv6 address in brackets: [ADDR]:PORT".to_owned());
    }
    let port: u16 = port
        .parse()
        .map_err(|_| format!("port `{port}` is not a number in 0..=65535"))?;
    Ok(HostPort {
        host: host.to_owned(),
        port,
    })
}

/// Resolves a listen address: `HOST:PORT` (host name or IP; `PLAINTEXT://` prefix and empty
/// host = all interfaces accepted). Uses the system resolver: call at start-up only.
pub fn parse_listen_addr(s: &str) -> Result<SocketAddr, String> {
    resolve(&s.parse()?)
}

/// Resolves `hp` for binding (empty host: every IPv4 interface). Uses the system resolver:
/// call at start-up only.
pub fn resolve(hp: &HostPort) -> Result<SocketAddr, String> {
    if hp.host.is_empty() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), hp.port));
    }
    if let Ok(ip) = hp.host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, hp.port));
    }
    let mut addrs = (hp.host.as_str(), hp.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{}`: {e}", hp.host))?;
    addrs
        .next()
        .ok_or_else(|| format!("`{}` resolves to no address", hp.host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_parsing() {
        let hp: HostPort = "a.b:1".parse().expect("valid");
        assert_eq!((hp.host.as_str(), hp.port), ("a.b", 1));
        assert!("a.b".parse::<HostPort>().is_err());
        assert!("a:b".parse::<HostPort>().is_err());
        assert!("a:70000".parse::<HostPort>().is_err());
        assert!("::1:9092".parse::<HostPort>().is_err());
        assert!("[::1".parse::<HostPort>().is_err());
        assert!("a:1,b:2".parse::<HostPort>().is_err());
    }

    #[test]
    fn listener_lists() {
        let l =
            parse_endpoints("PLAINTEXT://:9092, ssl://h:9093,INTERNAL://[::1]:1").expect("valid");
        let names: Vec<&str> = l.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["PLAINTEXT", "SSL", "INTERNAL"]);
        assert_eq!(l[0].host_port.host, "");
        assert_eq!(l[2].host_port.host, "::1");
        assert_eq!(l[2].to_string(), "INTERNAL://[::1]:1");
        let bare = parse_endpoints("127.0.0.1:1").expect("bare");
        assert_eq!(bare[0].name, "PLAINTEXT");
        let err = parse_endpoints("PLAINTEXT://a:1,PLAINTEXT://a:2").expect_err("twice");
        assert!(
            err.contains("Each listener must have a different name"),
            "{err}"
        );
        assert!(parse_endpoints("").is_err());
        assert!(parse_endpoints("X Y://a:1").is_err());
        assert!(parse_endpoints("SSL://a").is_err());
    }

    #[test]
    fn protocol_maps() {
        let m = parse_protocol_map("internal:PLAINTEXT,EXTERNAL:sasl_ssl").expect("valid");
        assert_eq!(
            m,
            vec![
                ("INTERNAL".to_owned(), SecurityProtocol::Plaintext),
                ("EXTERNAL".to_owned(), SecurityProtocol::SaslSsl)
            ]
        );
        assert!(parse_protocol_map("A:TLS")
            .expect_err("unknown")
            .contains("No enum constant"));
        assert!(parse_protocol_map("A").is_err());
        assert!(parse_protocol_map("A:SSL,a:SSL").is_err());
        assert_eq!(SecurityProtocol::SaslSsl.id(), 3);
        assert!(SecurityProtocol::SaslSsl.uses_tls() && SecurityProtocol::SaslSsl.uses_sasl());
    }
}
