//! ApiVersions (key 18): the broker's supported ranges. An unsupported ApiVersions version is
//! answered before decoding, in the v0 layout (KIP-511; see `connection.rs`).

use net::kafka_protocol::messages::ApiVersionsResponse;

pub fn handle() -> ApiVersionsResponse {
    super::supported_versions().to_api_versions_response(0, 0)
}
