//! Who is on the other end of a connection: the principal requests are authorized as and the
//! client's address (DESIGN.md §12, security). A plaintext listener's principal is Kafka's
//! `User:ANONYMOUS`.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Kafka's principal of an unauthenticated connection (`KafkaPrincipal.ANONYMOUS`).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// One connection's identity, shared by its requests.
#[derive(Debug)]
pub struct Session {
    /// `Type:name`, e.g. `User:alice`: from the client certificate on a TLS listener, from
    /// SASL on a SASL listener once authenticated, else [`ANONYMOUS`].
    pub principal: String,
    /// The name of the listener the client connected to, upper case (Metadata, DescribeCluster
    /// and FindCoordinator answer with that listener's endpoints, as Kafka does).
    pub listener: Rc<str>,
    /// The client's address in Kafka's `/ip` form (DescribeGroups' `client_host`), "" when the
    /// socket has no peer address.
    pub client_host: Rc<str>,
    /// Until when the connection reads no further request (a quota's throttle, KIP-219).
    throttled_until: Cell<Option<Instant>>,
}

impl Session {
    /// An unauthenticated connection from `client_host` (`/ip` form) to `listener`.
    pub fn anonymous(client_host: Rc<str>, listener: Rc<str>) -> Session {
        Session {
            principal: ANONYMOUS.to_string(),
            listener,
            client_host,
            throttled_until: Cell::new(None),
        }
    }

    /// The same connection once SASL authenticated it as `principal` (its throttle kept).
    pub fn authenticated(&self, principal: String) -> Session {
        Session {
            principal,
            listener: self.listener.clone(),
            client_host: self.client_host.clone(),
            throttled_until: Cell::new(self.throttled_until.get()),
        }
    }

    /// The principal's name (`alice` of `User:alice`): the `user` entity of client quotas.
    pub fn user(&self) -> &str {
        self.principal
            .split_once(':')
            .map_or(self.principal.as_str(), |(_, name)| name)
    }

    /// Mutes the connection for `throttle` from now (a longer mute already set stays).
    pub fn throttle_for(&self, throttle: Duration) {
        let until = Instant::now() + throttle;
        if self.throttled_until.get().is_none_or(|t| t < until) {
            self.throttled_until.set(Some(until));
        }
    }

    /// How long the connection must still wait before reading its next request.
    pub fn throttle_left(&self) -> Option<Duration> {
        let until = self.throttled_until.get()?;
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            self.throttled_until.set(None);
            return None;
        }
        Some(left)
    }

    /// The client's address as ACL hosts name it (`1.2.3.4`, no leading slash).
    pub fn host(&self) -> &str {
        self.client_host.trim_start_matches('/')
    }
}
