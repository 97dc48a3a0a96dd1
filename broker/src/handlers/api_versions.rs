//! ApiVersions (key 18): the broker's supported ranges. An unsupported ApiVersions version is
//! answered before decoding, in the v0 layout (KIP-511; see `connection.rs`).

use net::kafka_protocol::messages::ApiVersionsResponse;
use net::ApiVersionTable;

/// The ApiVersions answer for the broker's `table` (the registry's, `super::supported_versions`).
pub fn handle(table: &ApiVersionTable) -> ApiVersionsResponse {
    table.to_api_versions_response(0, 0)
}
