//! SCRAM credentials (KRaft's `ScramControlManager`): AlterUserScramCredentials as records.

use super::super::image::MetadataImage;
use super::super::record::{
    MetadataRecord, RemoveUserScramCredentialRecord, UserScramCredentialRecord,
};
use super::super::scram::{
    validate_name_and_mechanism, validate_upsertion, ScramAlterError, ScramAlterResult,
    ScramUpsertion,
};
use std::collections::BTreeSet;

/// The records of an AlterUserScramCredentials on `image` and each user's result, as Kafka's
/// `alterCredentials`: a user named twice (deletions and upsertions together) is refused
/// DUPLICATE_RESOURCE and changes nothing; a deletion must name an existing credential; an
/// upsertion's salted password becomes its `StoredKey` and `ServerKey`. Results: the deletions
/// done, the upsertions done, then the refused, each group in request order.
pub(super) fn alter(
    image: &MetadataImage,
    deletions: &[(String, i8)],
    upsertions: &[ScramUpsertion],
) -> (Vec<MetadataRecord>, Vec<ScramAlterResult>) {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut duplicated: BTreeSet<&str> = BTreeSet::new();
    for name in deletions
        .iter()
        .map(|(n, _)| n.as_str())
        .chain(upsertions.iter().map(|u| u.name.as_str()))
    {
        if !seen.insert(name) {
            duplicated.insert(name);
        }
    }
    let mut records = Vec::new();
    let (mut deleted, mut upserted, mut refused) = (Vec::new(), Vec::new(), Vec::new());
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    for (name, mechanism) in deletions {
        if duplicated.contains(name.as_str()) {
            if reported.insert(name) {
                refused.push((name.clone(), Err(ScramAlterError::Duplicate)));
            }
            continue;
        }
        let checked = validate_name_and_mechanism(name, *mechanism).and_then(|m| {
            image
                .scram_credentials
                .get(name)
                .and_then(|c| c.get(&m))
                .map(|_| ())
                .ok_or(ScramAlterError::NotFound)
        });
        match checked {
            Ok(()) => {
                records.push(MetadataRecord::RemoveUserScramCredential(
                    RemoveUserScramCredentialRecord {
                        name: name.clone(),
                        mechanism: *mechanism,
                    },
                ));
                deleted.push((name.clone(), Ok(())));
            }
            Err(e) => refused.push((name.clone(), Err(e))),
        }
    }
    for u in upsertions {
        if duplicated.contains(u.name.as_str()) {
            if reported.insert(&u.name) {
                refused.push((u.name.clone(), Err(ScramAlterError::Duplicate)));
            }
            continue;
        }
        match validate_upsertion(u) {
            Ok(m) => {
                records.push(MetadataRecord::UserScramCredential(
                    UserScramCredentialRecord {
                        name: u.name.clone(),
                        mechanism: u.mechanism,
                        salt: u.salt.clone(),
                        stored_key: m.stored_key(&u.salted_password),
                        server_key: m.server_key(&u.salted_password),
                        iterations: u.iterations,
                    },
                ));
                upserted.push((u.name.clone(), Ok(())));
            }
            Err(e) => refused.push((u.name.clone(), Err(e))),
        }
    }
    deleted.extend(upserted);
    deleted.extend(refused);
    (records, deleted)
}
