//! ApiVersions (key 18): the broker's supported ranges, and (v3+, KIP-584) its features. An
//! unsupported ApiVersions version is answered before decoding, in the v0 layout (KIP-511; see
//! `connection.rs`).
//!
//! Features: `transaction.version` is supported 0–1 and finalized at 1, the level the
//! transaction coordinator implements (`crate::txn`: KIP-890 part 1, no epoch bump per
//! transaction), so clients do not use transaction version 2's protocol. Finalized levels are
//! fixed here, not metadata records yet, so their epoch is 0.

use net::kafka_protocol::messages::api_versions_response::{
    FinalizedFeatureKey, SupportedFeatureKey,
};
use net::kafka_protocol::messages::ApiVersionsResponse;
use net::kafka_protocol::protocol::StrBytes;
use net::ApiVersionTable;

/// Kafka's feature name of the transaction protocol level (KIP-890).
const TRANSACTION_VERSION: &str = "transaction.version";
/// The `transaction.version` this broker implements and finalizes.
const TRANSACTION_VERSION_LEVEL: i16 = 1;

/// The ApiVersions answer for the broker's `table` (the registry's, `super::supported_versions`).
pub fn handle(table: &ApiVersionTable) -> ApiVersionsResponse {
    let mut response = table.to_api_versions_response(0, 0);
    response.supported_features = vec![SupportedFeatureKey::default()
        .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
        .with_min_version(0)
        .with_max_version(TRANSACTION_VERSION_LEVEL)];
    response.finalized_features_epoch = 0;
    response.finalized_features = vec![FinalizedFeatureKey::default()
        .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
        .with_min_version_level(TRANSACTION_VERSION_LEVEL)
        .with_max_version_level(TRANSACTION_VERSION_LEVEL)];
    response
}
