//! ApiVersions (key 18): the broker's supported ranges and, from v3 (KIP-584), its supported
//! features and the cluster's finalized ones with their epoch (the metadata offset of the
//! image this broker serves), as Kafka's `ApiVersionsResponse` lists them (see
//! `replication::metadata::SUPPORTED_FEATURES` for what Sluice claims). An unsupported
//! ApiVersions version is answered before decoding, in the v0 layout (KIP-511; see
//! `connection.rs`).

use super::wire::str_bytes;
use crate::metadata::ClusterMetadata;
use net::kafka_protocol::messages::api_versions_response::{
    FinalizedFeatureKey, SupportedFeatureKey,
};
use net::kafka_protocol::messages::ApiVersionsResponse;
use net::ApiVersionTable;
use replication::metadata::{finalized_features, SUPPORTED_FEATURES};

/// The ApiVersions answer for the broker's `table` (the registry's, `super::supported_versions`)
/// with the features of `meta`.
pub fn handle(table: &ApiVersionTable, meta: &ClusterMetadata) -> ApiVersionsResponse {
    let mut response = table.to_api_versions_response(0, 0);
    response.supported_features = SUPPORTED_FEATURES
        .iter()
        .map(|&(name, min, max)| {
            let mut key = SupportedFeatureKey::default();
            key.name = str_bytes(name);
            key.min_version = min;
            key.max_version = max;
            key
        })
        .collect();
    response.finalized_features = finalized_features(meta)
        .into_iter()
        .map(|(name, level)| {
            let mut key = FinalizedFeatureKey::default();
            key.name = str_bytes(name);
            key.max_version_level = level;
            key.min_version_level = level;
            key
        })
        .collect();
    response.finalized_features_epoch = i64::try_from(meta.metadata_offset).unwrap_or(i64::MAX);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use replication::metadata::MetadataImage;

    #[test]
    fn features_are_listed_with_the_image_offset_as_epoch() {
        let mut meta = ClusterMetadata::new(MetadataImage::new("c".into()), 1, 1);
        meta.metadata_offset = 42;
        let r = handle(super::super::supported_versions(), &meta);
        let supported: Vec<_> = r
            .supported_features
            .iter()
            .map(|f| (f.name.to_string(), f.min_version, f.max_version))
            .collect();
        assert_eq!(
            supported,
            [
                ("metadata.version".to_string(), 7, 7),
                ("transaction.version".to_string(), 0, 2)
            ]
        );
        let finalized: Vec<_> = r
            .finalized_features
            .iter()
            .map(|f| (f.name.to_string(), f.min_version_level, f.max_version_level))
            .collect();
        assert_eq!(
            finalized,
            [
                ("metadata.version".to_string(), 7, 7),
                ("transaction.version".to_string(), 2, 2)
            ]
        );
        assert_eq!(r.finalized_features_epoch, 42);
    }
}
