//! UpdateFeatures (key 57), v0–2 (KIP-584, KIP-778): the active controller checks the updates
//! in Kafka's order and records each as a `FeatureLevelRecord`
//! (`replication::metadata::ControllerOp::UpdateFeatures`, as KRaft's
//! `FeatureControlManager::updateFeatures`); a broker that is not the controller forwards it.
//! v0's `allow_downgrade` is a safe downgrade; from v1 `upgrade_type` says (1 upgrade, 2 safe,
//! 3 unsafe downgrade) and `validate_only` checks without recording.
//!
//! Answers as Kafka's `QuorumController::updateFeatures`: a refused update refuses all, with
//! `INVALID_UPDATE_VERSION` and "The update failed for all features since the following
//! feature had an error: …" at the top and no per-feature results; on success, v0–1 list each
//! feature with no error (v2 has no results). A controller that cannot be reached answers as
//! `UpdateFeaturesResponse::createWithErrors`: its error at the top, no results.
//! `timeout_ms` is not used (the controller's own proposal timeout, 15 s, applies).

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use net::kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use replication::metadata::{ControllerError, ControllerOp, FeatureUpdate, UpgradeType};
use std::rc::Rc;

/// The last version whose response lists each feature's result.
const RESULTS_MAX_VERSION: i16 = 1;

/// Runs the update on the active controller.
pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: UpdateFeaturesRequest,
    version: i16,
) -> UpdateFeaturesResponse {
    // Kafka: ALTER on the cluster (`crate::authz`).
    if !authz::cluster(shard, session, AclOperation::Alter) {
        let mut response = UpdateFeaturesResponse::default();
        response.error_code = code(ResponseError::ClusterAuthorizationFailed);
        return response;
    }
    let op = ControllerOp::UpdateFeatures {
        updates: updates(&req, version),
        validate_only: req.validate_only,
    };
    let result = crate::controller::call(shard, op).await;
    response(&req, version, result)
}

/// The request's updates; v0's `allow_downgrade` is a safe downgrade.
fn updates(req: &UpdateFeaturesRequest, version: i16) -> Vec<FeatureUpdate> {
    req.feature_updates
        .iter()
        .map(|u| FeatureUpdate {
            feature: u.feature.to_string(),
            max_version_level: u.max_version_level,
            upgrade_type: match (version, u.allow_downgrade) {
                (0, true) => UpgradeType::SafeDowngrade,
                (0, false) => UpgradeType::Upgrade,
                _ => UpgradeType::from_code(u.upgrade_type),
            },
        })
        .collect()
}

fn response(
    req: &UpdateFeaturesRequest,
    version: i16,
    result: Result<(), ControllerError>,
) -> UpdateFeaturesResponse {
    let mut response = UpdateFeaturesResponse::default();
    match result {
        Ok(()) => {
            if version <= RESULTS_MAX_VERSION {
                response.results = req
                    .feature_updates
                    .iter()
                    .map(|u| {
                        let mut r = UpdatableFeatureResult::default();
                        r.feature = u.feature.clone();
                        r
                    })
                    .collect();
            }
        }
        Err(ControllerError::FeatureUpdateRefused { message }) => {
            response.error_code = code(ResponseError::InvalidUpdateVersion);
            response.error_message = Some(str_bytes(format!(
                "The update failed for all features since the following feature had an \
                 error: {message}"
            )));
        }
        Err(e) => {
            let (error_code, message) = controller_error(&e);
            response.error_code = error_code;
            response.error_message = Some(str_bytes(message));
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use net::kafka_protocol::messages::update_features_request::FeatureUpdateKey;

    fn request(updates: &[(&str, i16, bool, i8)]) -> UpdateFeaturesRequest {
        let mut req = UpdateFeaturesRequest::default();
        req.feature_updates = updates
            .iter()
            .map(|&(feature, level, allow_downgrade, upgrade_type)| {
                let mut u = FeatureUpdateKey::default();
                u.feature = str_bytes(feature);
                u.max_version_level = level;
                u.allow_downgrade = allow_downgrade;
                u.upgrade_type = upgrade_type;
                u
            })
            .collect();
        req
    }

    #[test]
    fn v0_allow_downgrade_is_a_safe_downgrade_and_later_versions_read_the_type() {
        let req = request(&[("a", 1, true, 1), ("b", 1, false, 3), ("c", 1, false, 9)]);
        let types = |v| {
            updates(&req, v)
                .iter()
                .map(|u| u.upgrade_type)
                .collect::<Vec<_>>()
        };
        use UpgradeType::*;
        assert_eq!(types(0), [SafeDowngrade, Upgrade, Upgrade]);
        assert_eq!(types(1), [Upgrade, UnsafeDowngrade, Unknown]);
    }

    #[test]
    fn results_are_listed_up_to_v1_and_a_refusal_is_at_the_top_only() {
        let req = request(&[("metadata.version", 7, false, 1)]);
        let ok = response(&req, 1, Ok(()));
        assert_eq!((ok.error_code, ok.results.len()), (0, 1));
        assert_eq!(ok.results[0].error_code, 0);
        assert!(response(&req, 2, Ok(())).results.is_empty());
        let refused = response(
            &req,
            1,
            Err(ControllerError::FeatureUpdateRefused {
                message: "Invalid update version 8 for feature metadata.version. x".into(),
            }),
        );
        assert_eq!(refused.error_code, 95);
        assert!(refused.results.is_empty());
        assert_eq!(
            refused.error_message.map(|m| m.to_string()).as_deref(),
            Some(
                "The update failed for all features since the following feature had an error: \
                 Invalid update version 8 for feature metadata.version. x"
            )
        );
    }
}
