//! Who sent a request: the connection-level facts a handler may need besides the request
//! itself — the client's address, the listener it connected to (Metadata, DescribeCluster and
//! FindCoordinator answer with that listener's endpoints, as Kafka does by listener name) and
//! its principal (from the client certificate on a TLS listener; `User:ANONYMOUS` otherwise),
//! kept for the authorizer. One per connection, shared by its requests.

use std::rc::Rc;

/// Kafka's principal of an unauthenticated client (`KafkaPrincipal.ANONYMOUS`).
pub const ANONYMOUS_PRINCIPAL: &str = "User:ANONYMOUS";

/// One connection's client.
#[derive(Clone, Debug)]
pub struct ClientContext {
    /// The client's address in Kafka's `/ip` form (DescribeGroups' `client_host`).
    pub host: Rc<str>,
    /// The name of the listener the client connected to, upper case.
    pub listener: Rc<str>,
    /// The client's principal, `User:NAME` (Kafka's `KafkaPrincipal` string form).
    pub principal: Rc<str>,
}
