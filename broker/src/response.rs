//! What the broker gives a connection for one request: a leaf type, below the handlers that
//! build it and the connection that writes it.

use bytes::Bytes;

/// What a handler gives the connection.
pub enum Response {
    /// The response frame in one buffer (every API but Fetch).
    Whole(Bytes),
    /// The response frame, as chunks to write in order (Fetch: header and record batches).
    Frame(Vec<Bytes>),
    /// No response, as the protocol says (Produce with acks=0).
    None,
    /// The response could not be built: close the connection rather than leave the client
    /// waiting for a correlation id that will never come.
    Close,
}
