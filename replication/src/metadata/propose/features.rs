//! Finalized features (KIP-584, KIP-778; KRaft's `FeatureControlManager`): the levels this
//! node supports ([`SUPPORTED_FEATURES`]), the finalized ones as the image has them
//! ([`finalized_features`]), and UpdateFeatures' checks in Kafka's order.
//!
//! Sluice supports only what it implements: `metadata.version` 3.3-IV3 (level 7, the lowest
//! Kafka 4.x accepts — the KRaft records Sluice keeps, without ZooKeeper migration, SCRAM,
//! delegation tokens, JBOD directories or ELR that later levels bring), `transaction.version`
//! 0–2 (finalized at 2 from the start, as `kafka-storage format` of Kafka 4.4 does: the
//! transaction coordinator implements KIP-890 part 2's epoch bump per transaction) and every
//! other feature at level 0: `kraft.version` 0 (a static voter set, no KIP-853), `group.version` 0 (the classic group
//! protocol only),
//! `eligible.leader.replicas.version` 0, `share.version` 0, `streams.version` 0. A feature
//! this node supports only at 0 is not listed, as Kafka lists only features with a level
//! above 0.

use super::super::image::MetadataImage;
use super::super::op::{ControllerError, FeatureUpdate, UpgradeType};
use super::super::record::{FeatureLevelRecord, MetadataRecord};

/// `metadata.version`'s name.
pub const METADATA_VERSION: &str = "metadata.version";

/// `metadata.version` 3.3-IV3: the only level Sluice supports, finalized from the start.
pub const METADATA_VERSION_BOOTSTRAP: i16 = 7;

/// `transaction.version`'s name (KIP-890).
pub const TRANSACTION_VERSION: &str = "transaction.version";

/// Every feature this node supports with a level above 0: (name, min level, max level).
pub const SUPPORTED_FEATURES: &[(&str, i16, i16)] = &[
    (
        METADATA_VERSION,
        METADATA_VERSION_BOOTSTRAP,
        METADATA_VERSION_BOOTSTRAP,
    ),
    (TRANSACTION_VERSION, 0, TRANSACTION_VERSION_MAX),
];

/// The highest `transaction.version` this node supports (KIP-890 part 2: EndTxn v5, Produce
/// v12, TxnOffsetCommit v5, an epoch bump per transaction), and a new cluster's level.
pub const TRANSACTION_VERSION_MAX: i16 = 2;

/// The finalized level of each feature no FeatureLevelRecord has set yet (a new cluster's).
const BOOTSTRAP_LEVELS: &[(&str, i16)] = &[
    (METADATA_VERSION, METADATA_VERSION_BOOTSTRAP),
    (TRANSACTION_VERSION, TRANSACTION_VERSION_MAX),
];

/// The lowest `metadata.version` a FeatureLevelRecord may set (3.3-IV0, the first with the
/// record; Kafka's `MetadataVersion.MINIMUM_BOOTSTRAP_VERSION`).
const METADATA_VERSION_MIN_SETTABLE: i16 = 4;

/// The finalized features of `image` as ApiVersions lists them: `metadata.version` and every
/// feature finalized above 0, in name order.
pub fn finalized_features(image: &MetadataImage) -> Vec<(String, i16)> {
    let mut levels: std::collections::BTreeMap<String, i16> = BOOTSTRAP_LEVELS
        .iter()
        .map(|&(name, level)| (name.to_string(), level))
        .collect();
    levels.extend(image.features.iter().map(|(n, l)| (n.clone(), *l)));
    levels.into_iter().filter(|(_, level)| *level > 0).collect()
}

/// The records of [`super::super::ControllerOp::UpdateFeatures`] on `image` (Kafka's
/// `FeatureControlManager::updateFeatures`): the first refused update refuses all, with
/// Kafka's message; `controller_id` is this controller (named in the refusals).
pub(super) fn update_features(
    image: &MetadataImage,
    controller_id: i32,
    updates: &[FeatureUpdate],
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let mut records = Vec::with_capacity(updates.len());
    for update in updates {
        check_update(image, controller_id, update)?;
        records.push(MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: update.feature.clone(),
            feature_level: update.max_version_level,
        }));
    }
    assert!(
        records.len() == updates.len(),
        "one record per accepted update"
    );
    Ok(records)
}

/// Kafka's `updateFeature` (and `updateMetadataVersion`) for one update.
fn check_update(
    image: &MetadataImage,
    controller_id: i32,
    update: &FeatureUpdate,
) -> Result<(), ControllerError> {
    let (feature, level) = (update.feature.as_str(), update.max_version_level);
    let refuse = |reason: String| ControllerError::FeatureUpdateRefused {
        message: format!("Invalid update version {level} for feature {feature}. {reason}"),
    };
    if update.upgrade_type == UpgradeType::Unknown {
        return Err(refuse(
            "The controller does not support the given upgrade type.".to_string(),
        ));
    }
    let current = current_level(image, feature);
    if level < 0 {
        return Err(refuse(
            "A feature version cannot be less than 0.".to_string(),
        ));
    }
    let (min, max) = supported(feature);
    if level < min || level > max {
        let what = format!("Local controller {controller_id}");
        return Err(refuse(if max == 0 {
            format!("{what} does not support this feature.")
        } else {
            format!("{what} only supports versions {}", version_range(min, max))
        }));
    }
    if level < current && update.upgrade_type == UpgradeType::Upgrade {
        return Err(refuse(
            "Can't downgrade the version of this feature without setting the upgrade type to \
             either safe or unsafe downgrade."
                .to_string(),
        ));
    }
    if level > current && update.upgrade_type != UpgradeType::Upgrade {
        return Err(refuse("Can't downgrade to a newer version.".to_string()));
    }
    if feature == METADATA_VERSION && level < METADATA_VERSION_MIN_SETTABLE {
        return Err(ControllerError::FeatureUpdateRefused {
            message: format!(
                "Invalid metadata.version {level}. Unable to set a metadata.version less than \
                 3.3-IV0"
            ),
        });
    }
    Ok(())
}

/// The finalized `transaction.version` of `image` (KIP-890): what the transaction coordinator
/// applies to the transactions it ends itself (fences and timeouts), as Kafka's
/// `TransactionStateManager.transactionVersionLevel`.
pub fn transaction_version(image: &MetadataImage) -> i16 {
    current_level(image, TRANSACTION_VERSION)
}

/// The finalized level of `feature` (0: not finalized).
fn current_level(image: &MetadataImage, feature: &str) -> i16 {
    image.features.get(feature).copied().unwrap_or_else(|| {
        BOOTSTRAP_LEVELS
            .iter()
            .find(|(name, _)| *name == feature)
            .map_or(0, |&(_, level)| level)
    })
}

/// The levels this node supports for `feature`: (0, 0) for one it supports only disabled.
fn supported(feature: &str) -> (i16, i16) {
    SUPPORTED_FEATURES
        .iter()
        .find(|(name, ..)| *name == feature)
        .map_or((0, 0), |&(_, min, max)| (min, max))
}

/// Kafka's `VersionRange.toString`.
fn version_range(min: i16, max: i16) -> String {
    if min == max {
        min.to_string()
    } else if max == i16::MAX {
        format!("{min}+")
    } else {
        format!("{min}-{max}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(feature: &str, level: i16, upgrade_type: UpgradeType) -> FeatureUpdate {
        FeatureUpdate {
            feature: feature.to_string(),
            max_version_level: level,
            upgrade_type,
        }
    }

    fn refusal(updates: &[FeatureUpdate]) -> String {
        match update_features(&MetadataImage::new("c".into()), 1, updates) {
            Err(ControllerError::FeatureUpdateRefused { message }) => message,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn metadata_and_transaction_versions_are_finalized_from_the_start() {
        let mut image = MetadataImage::new("c".into());
        assert_eq!(
            finalized_features(&image),
            [
                ("metadata.version".to_string(), 7),
                ("transaction.version".to_string(), 2)
            ]
        );
        image
            .apply(&MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name: "a.feature".into(),
                feature_level: 2,
            }))
            .expect("applies");
        assert_eq!(
            finalized_features(&image),
            [
                ("a.feature".to_string(), 2),
                ("metadata.version".to_string(), 7),
                ("transaction.version".to_string(), 2)
            ]
        );
        // Level 0 takes it out of the finalized set (kept at 0, so that a feature with a
        // bootstrap level stays at 0); a snapshot keeps what is finalized.
        let copy = image.clone();
        image
            .apply(&MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name: "a.feature".into(),
                feature_level: 0,
            }))
            .expect("applies");
        assert!(!finalized_features(&image)
            .iter()
            .any(|(n, _)| n == "a.feature"));
        image
            .apply(&MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name: "transaction.version".into(),
                feature_level: 0,
            }))
            .expect("applies");
        assert_eq!(
            finalized_features(&image),
            [("metadata.version".to_string(), 7)]
        );
        let mut rebuilt = MetadataImage::new("c".into());
        for record in copy.to_records() {
            rebuilt.apply(&record).expect("applies");
        }
        assert_eq!(rebuilt.features, copy.features);
    }

    #[test]
    fn supported_levels_are_recorded() {
        let image = MetadataImage::new("c".into());
        let updates = [
            update("metadata.version", 7, UpgradeType::Upgrade),
            update("transaction.version", 0, UpgradeType::SafeDowngrade),
        ];
        let records = update_features(&image, 1, &updates).expect("supported");
        assert_eq!(
            records,
            [
                MetadataRecord::FeatureLevel(FeatureLevelRecord {
                    name: "metadata.version".into(),
                    feature_level: 7
                }),
                MetadataRecord::FeatureLevel(FeatureLevelRecord {
                    name: "transaction.version".into(),
                    feature_level: 0
                }),
            ]
        );
    }

    #[test]
    fn refusals_carry_kafkas_messages() {
        use UpgradeType::*;
        assert_eq!(
            refusal(&[update("transaction.version", 3, Upgrade)]),
            "Invalid update version 3 for feature transaction.version. Local controller 1 only \
             supports versions 0-2"
        );
        assert_eq!(
            refusal(&[update("group.version", 1, Upgrade)]),
            "Invalid update version 1 for feature group.version. Local controller 1 does not \
             support this feature."
        );
        assert_eq!(
            refusal(&[update("metadata.version", 33, Upgrade)]),
            "Invalid update version 33 for feature metadata.version. Local controller 1 only \
             supports versions 7"
        );
        assert_eq!(
            refusal(&[update("metadata.version", 7, Unknown)]),
            "Invalid update version 7 for feature metadata.version. The controller does not \
             support the given upgrade type."
        );
        assert_eq!(
            refusal(&[update("group.version", -1, SafeDowngrade)]),
            "Invalid update version -1 for feature group.version. A feature version cannot be \
             less than 0."
        );
        // One refused update refuses them all.
        let updates = [
            update("metadata.version", 7, Upgrade),
            update("kraft.version", 1, Upgrade),
        ];
        assert!(refusal(&updates).contains("kraft.version. Local controller 1 does not support"));
    }

    #[test]
    fn the_direction_must_match_the_upgrade_type() {
        let mut image = MetadataImage::new("c".into());
        image.features.insert("x".into(), 1);
        let check = |u: FeatureUpdate| check_update(&image, 1, &u);
        // "x" is finalized at 1 but supported only at 0 here: a downgrade to 0 needs a
        // downgrade type.
        let up = check(update("x", 0, UpgradeType::Upgrade));
        assert!(
            matches!(&up, Err(ControllerError::FeatureUpdateRefused { message })
                if message.ends_with("without setting the upgrade type to either safe or unsafe downgrade.")),
            "{up:?}"
        );
        assert!(check(update("x", 0, UpgradeType::SafeDowngrade)).is_ok());
        assert!(check(update("x", 0, UpgradeType::UnsafeDowngrade)).is_ok());
    }
}
