//! Who is on the other end of a connection: the principal requests are authorized as and the
//! client's address (DESIGN.md §12, security). A plaintext listener's principal is Kafka's
//! `User:ANONYMOUS`.

use std::rc::Rc;

/// Kafka's principal of an unauthenticated connection (`KafkaPrincipal.ANONYMOUS`).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// One connection's identity, shared by its requests.
#[derive(Debug)]
pub struct Session {
    /// `Type:name`, e.g. `User:alice`.
    pub principal: String,
    /// The client's address in Kafka's `/ip` form (DescribeGroups' `client_host`), "" when the
    /// socket has no peer address.
    pub client_host: Rc<str>,
}

impl Session {
    /// An unauthenticated connection from `client_host` (`/ip` form).
    pub fn anonymous(client_host: Rc<str>) -> Session {
        Session {
            principal: ANONYMOUS.to_string(),
            client_host,
        }
    }

    /// The client's address as ACL hosts name it (`1.2.3.4`, no leading slash).
    pub fn host(&self) -> &str {
        self.client_host.trim_start_matches('/')
    }
}
