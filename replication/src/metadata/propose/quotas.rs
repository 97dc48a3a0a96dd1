//! Client quotas (KRaft's `ClientQuotaControlManager`): AlterClientQuotas as records.

use super::super::image::MetadataImage;
use super::super::quotas::{validate_entity, validate_value, QuotaChanges, QuotaValue};
use super::super::record::{ClientQuotaRecord, MetadataRecord};

/// The records of an AlterClientQuotas on `image` and each entity's result: a removal only of
/// a key that is set, a value only when it changes; an entity with a refused change gets no
/// record at all (Kafka's `alterClientQuotaEntity`).
pub(super) fn alter(
    image: &MetadataImage,
    entries: &[QuotaChanges],
) -> (Vec<MetadataRecord>, Vec<Result<(), String>>) {
    let mut records = Vec::new();
    let results = entries
        .iter()
        .map(|(entity, changes)| {
            let entity = validate_entity(entity)?;
            let current = image.client_quotas.get(&entity);
            let mut these = Vec::new();
            for (key, value) in changes {
                let now = current.and_then(|c| c.get(key));
                match value {
                    None if now.is_some() => these.push(ClientQuotaRecord {
                        entity: entity.clone(),
                        key: key.clone(),
                        value: QuotaValue(0.0),
                        remove: true,
                    }),
                    None => {}
                    Some(v) => {
                        validate_value(&entity, key, v.0)?;
                        if now != Some(v) {
                            these.push(ClientQuotaRecord {
                                entity: entity.clone(),
                                key: key.clone(),
                                value: *v,
                                remove: false,
                            });
                        }
                    }
                }
            }
            records.extend(these.into_iter().map(MetadataRecord::ClientQuota));
            Ok(())
        })
        .collect();
    (records, results)
}
