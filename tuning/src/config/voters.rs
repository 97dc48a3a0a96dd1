//! `controller.quorum.voters` (Kafka's static voter list, KIP-595): `id@host:port,…`, parsed
//! into [`QuorumVoter`]s with the address resolved once, at start-up.
//!
//! Limits: a static voter set only (Kafka's dynamic `controller.quorum.bootstrap.servers`,
//! KIP-853, is not supported); a host name is resolved with the system resolver (blocking) to
//! its first address.

use super::listener::{parse_listen_addr, HostPort};
use std::collections::BTreeSet;
use std::fmt;
use std::net::SocketAddr;

/// One voter of the controller quorum: a node id and the address its quorum transport
/// listens on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuorumVoter {
    /// The voter's `node.id` (at least 0).
    pub id: i32,
    /// Where the voter accepts connections from the other voters.
    pub addr: SocketAddr,
}

impl fmt::Display for QuorumVoter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.id, self.addr)
    }
}

/// Renders `voters` as `controller.quorum.voters` is written (`id@host:port,…`; resolved
/// addresses).
pub fn render_quorum_voters(voters: &[QuorumVoter]) -> String {
    voters
        .iter()
        .map(QuorumVoter::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses `controller.quorum.voters`: comma-separated `id@host:port` entries (`host` a name,
/// an IPv4 literal or a bracketed IPv6 literal; port 1..=65535). The empty string is the
/// empty list (this node is a one-voter quorum of itself).
///
/// # Errors
/// What is wrong, for [`super::ConfigError::InvalidValue`]: a malformed entry (no `@`, a
/// negative or non-numeric id, no host, port 0, a listener scheme), a name that does not
/// resolve, or two entries with the same id or the same address.
pub fn parse_quorum_voters(value: &str) -> Result<Vec<QuorumVoter>, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let mut voters = Vec::new();
    let mut ids = BTreeSet::new();
    let mut addrs = BTreeSet::new();
    for entry in value.split(',') {
        let voter = parse_entry(entry.trim())?;
        if !ids.insert(voter.id) {
            return Err(format!("node id {} is named twice", voter.id));
        }
        if !addrs.insert(voter.addr) {
            return Err(format!("address {} is named twice", voter.addr));
        }
        voters.push(voter);
    }
    Ok(voters)
}

/// Parses `controller.quorum.bootstrap.servers` (KIP-853): comma-separated `host:port`
/// controller endpoints, each resolved (as [`parse_quorum_voters`]'s). The empty string is the
/// empty list.
///
/// # Errors
/// What is wrong: a malformed entry (no host, port 0, a listener scheme), a name that does not
/// resolve, or an address named twice.
pub fn parse_bootstrap_servers(value: &str) -> Result<Vec<SocketAddr>, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let mut servers = Vec::new();
    for entry in value.split(',').map(str::trim) {
        let malformed = |why: &str| format!("entry `{entry}`: {why} (expected HOST:PORT)");
        if entry.contains("://") {
            return Err(malformed("a listener scheme is not allowed here"));
        }
        let host_port: HostPort = entry
            .parse()
            .map_err(|why: String| format!("entry `{entry}`: {why}"))?;
        if host_port.host.is_empty() || host_port.port == 0 {
            return Err(malformed("no host or port 0"));
        }
        let addr = parse_listen_addr(entry).map_err(|why| malformed(&why))?;
        if servers.contains(&addr) {
            return Err(format!("address {addr} is named twice"));
        }
        servers.push(addr);
    }
    Ok(servers)
}

/// Renders `controller.quorum.bootstrap.servers` (`host:port,…`; resolved addresses).
pub fn render_bootstrap_servers(servers: &[SocketAddr]) -> String {
    servers
        .iter()
        .map(SocketAddr::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn parse_entry(entry: &str) -> Result<QuorumVoter, String> {
    let malformed = |why: &str| format!("entry `{entry}`: {why} (expected ID@HOST:PORT)");
    let (id, address) = entry.split_once('@').ok_or_else(|| malformed("no `@`"))?;
    let id: i32 = id
        .trim()
        .parse()
        .map_err(|_| malformed("the node id is not an integer"))?;
    if id < 0 {
        return Err(malformed("the node id is negative"));
    }
    if address.contains("://") {
        return Err(malformed("a listener scheme is not allowed here"));
    }
    let host_port: HostPort = address.parse().map_err(|why: String| malformed(&why))?;
    if host_port.host.is_empty() {
        return Err(malformed("no host"));
    }
    if host_port.port == 0 {
        return Err(malformed("port 0"));
    }
    let addr = parse_listen_addr(address).map_err(|why| malformed(&why))?;
    Ok(QuorumVoter { id, addr })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_servers() {
        assert_eq!(parse_bootstrap_servers(" "), Ok(Vec::new()));
        let servers = parse_bootstrap_servers("127.0.0.1:9093, [::1]:9094").expect("valid");
        assert_eq!(
            render_bootstrap_servers(&servers),
            "127.0.0.1:9093,[::1]:9094"
        );
        for bad in [
            "1@127.0.0.1:9093",
            "127.0.0.1:0",
            "CONTROLLER://127.0.0.1:1",
            ":9093",
        ] {
            assert!(parse_bootstrap_servers(bad).is_err(), "{bad}");
        }
        assert!(parse_bootstrap_servers("127.0.0.1:9093,127.0.0.1:9093").is_err());
    }

    #[test]
    fn good_voter_lists() {
        assert_eq!(parse_quorum_voters(""), Ok(Vec::new()));
        assert_eq!(parse_quorum_voters("  "), Ok(Vec::new()));
        let voters =
            parse_quorum_voters("1@127.0.0.1:9093, 2@[::1]:9094,3@localhost:9095").expect("valid");
        let ids: Vec<i32> = voters.iter().map(|v| v.id).collect();
        assert_eq!(ids, vec![1, 2, 3]);
        assert_eq!(voters[0].addr, "127.0.0.1:9093".parse().expect("literal"));
        assert_eq!(voters[1].addr, "[::1]:9094".parse().expect("literal"));
        assert_eq!(voters[2].addr.port(), 9095);
        let again = parse_quorum_voters(&render_quorum_voters(&voters[..2])).expect("round trip");
        assert_eq!(again, voters[..2]);
    }

    #[test]
    fn bad_voter_lists() {
        for (bad, why) in [
            ("1", "no `@`"),
            ("127.0.0.1:9093", "no `@`"),
            ("x@127.0.0.1:9093", "not an integer"),
            ("-1@127.0.0.1:9093", "negative"),
            ("1@127.0.0.1", "HOST:PORT"),
            ("1@:9093", "no host"),
            ("1@127.0.0.1:0", "port 0"),
            ("1@127.0.0.1:70000", "port"),
            ("1@PLAINTEXT://127.0.0.1:9093", "scheme"),
            ("1@::1:9093", "brackets"),
            ("1@127.0.0.1:9093,", "entry ``"),
            ("1@127.0.0.1:9093,,2@127.0.0.1:9094", "entry ``"),
            ("1@127.0.0.1:9093,1@127.0.0.1:9094", "named twice"),
            ("1@127.0.0.1:9093,2@127.0.0.1:9093", "named twice"),
            ("1@no-such-host.invalid:9093", "resolve"),
        ] {
            let err = parse_quorum_voters(bad).expect_err(bad);
            assert!(err.contains(why), "`{bad}`: {err}");
        }
    }
}
