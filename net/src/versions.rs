//! The broker's table of supported API versions and the `ApiVersions` response built from it
//! (Kafka protocol guide, "Versioning"; KIP-35, KIP-511).
//!
//! The table is filled once at start-up by the broker (one entry per implemented API) and then
//! only read: [`crate::decode_request`] checks every request against it, and the `ApiVersions`
//! handler answers with [`ApiVersionTable::to_api_versions_response`].

use std::collections::BTreeMap;

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::VersionRange;

use crate::NetError;

/// Supported `[min, max]` version range per API key.
///
/// Invariant: every range is non-empty and inside what `kafka-protocol` can decode for that API
/// (`ApiKey::valid_versions`), so a request that passes [`ApiVersionTable::get`] can be decoded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiVersionTable {
    /// Keyed by the raw API key so that iteration (and the `ApiVersions` answer) is in key order.
    ranges: BTreeMap<i16, (ApiKey, VersionRange)>,
}

impl ApiVersionTable {
    /// An empty table: every request is [`NetError::UnsupportedVersion`] until APIs are added.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares that the broker serves `api_key` at versions `min..=max`, replacing an earlier
    /// entry for the same key.
    ///
    /// # Errors
    /// [`NetError::InvalidVersionRange`] when `min > max`, or when the range is not inside
    /// `api_key.valid_versions()` of `kafka-protocol` (the broker could not decode it).
    pub fn insert(&mut self, api_key: ApiKey, min: i16, max: i16) -> Result<(), NetError> {
        let codec = api_key.valid_versions();
        if min > max || min < codec.min || max > codec.max {
            return Err(NetError::InvalidVersionRange {
                api_key,
                min,
                max,
                codec_min: codec.min,
                codec_max: codec.max,
            });
        }
        self.ranges
            .insert(api_key as i16, (api_key, VersionRange { min, max }));
        Ok(())
    }

    /// Builder form of [`ApiVersionTable::insert`].
    ///
    /// # Errors
    /// As [`ApiVersionTable::insert`].
    pub fn with(mut self, api_key: ApiKey, min: i16, max: i16) -> Result<Self, NetError> {
        self.insert(api_key, min, max)?;
        Ok(self)
    }

    /// The version range served for `api_key`, or `None` if the broker does not serve it.
    pub fn get(&self, api_key: ApiKey) -> Option<VersionRange> {
        self.ranges.get(&(api_key as i16)).map(|(_, range)| *range)
    }

    /// Whether the broker serves `api_key` at `api_version`.
    pub fn supports(&self, api_key: ApiKey, api_version: i16) -> bool {
        self.get(api_key)
            .is_some_and(|range| range.min <= api_version && api_version <= range.max)
    }

    /// The entries in API key order.
    pub fn iter(&self) -> impl Iterator<Item = (ApiKey, VersionRange)> + '_ {
        self.ranges.values().copied()
    }

    /// Number of APIs served.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether no API is served.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The `ApiVersions` response listing every served API, with `error_code` (0, or 35
    /// `UNSUPPORTED_VERSION` per KIP-511) and `throttle_time_ms` (ignored by v0).
    /// Feature fields (v3+) are left empty.
    pub fn to_api_versions_response(
        &self,
        error_code: i16,
        throttle_time_ms: i32,
    ) -> ApiVersionsResponse {
        let api_keys = self
            .iter()
            .map(|(api_key, range)| {
                ApiVersion::default()
                    .with_api_key(api_key as i16)
                    .with_min_version(range.min)
                    .with_max_version(range.max)
            })
            .collect();
        ApiVersionsResponse::default()
            .with_error_code(error_code)
            .with_api_keys(api_keys)
            .with_throttle_time_ms(throttle_time_ms)
    }
}
