//! Listener addresses: `HOST:PORT` as given ([`HostPort`], for advertising) and resolved
//! ([`parse_listen_addr`], for binding), in Kafka's `PLAINTEXT://` listener syntax.

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
}

/// Resolves a listen address: `HOST:PORT` (host name or IP; `PLAINTEXT://` prefix and empty
/// host = all interfaces accepted). Uses the system resolver: call at start-up only.
pub fn parse_listen_addr(s: &str) -> Result<SocketAddr, String> {
    let hp: HostPort = s.parse()?;
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
}
