//! ACLs (KRaft's `AclControlManager`): CreateAcls and DeleteAcls as records.

use super::super::acl::{validate_new, AclBinding, AclBindingFilter, InvalidAcl};
use super::super::image::MetadataImage;
use super::super::op::{ControllerError, ProposeContext, ACL_RECORDS_PER_OP_MAX};
use super::super::record::{
    AccessControlEntryRecord, MetadataRecord, RemoveAccessControlEntryRecord,
};
use uuid::Uuid;

/// One `AccessControlEntryRecord` per valid creation whose binding is not present yet (nor
/// earlier in the same request); ids count up from the context's fresh uuid, skipping taken
/// ones.
pub(super) fn create_acls(
    image: &MetadataImage,
    ctx: &ProposeContext<'_>,
    creations: &[AclBinding],
) -> Vec<MetadataRecord> {
    let mut records: Vec<MetadataRecord> = Vec::new();
    let mut next_id = ctx.new_topic_id.as_u128();
    for binding in creations {
        if validate_new(binding).is_err() || image.acls.values().any(|b| b == binding) {
            continue;
        }
        let duplicate = records
            .iter()
            .any(|r| matches!(r, MetadataRecord::AccessControlEntry(e) if e.binding == *binding));
        if !duplicate {
            // The next id not taken (invariant 5 of the image).
            while image.acls.contains_key(&Uuid::from_u128(next_id)) {
                next_id = next_id.wrapping_add(1);
            }
            records.push(MetadataRecord::AccessControlEntry(
                AccessControlEntryRecord {
                    id: Uuid::from_u128(next_id),
                    binding: binding.clone(),
                },
            ));
            next_id = next_id.wrapping_add(1);
        }
    }
    records
}

/// The answer of CreateAcls: each creation's validity.
pub(super) fn create_results(creations: &[AclBinding]) -> Vec<Result<(), InvalidAcl>> {
    creations.iter().map(validate_new).collect()
}

/// One removal per ACL that any valid filter matches. Errors:
/// [`ControllerError::TooManyAclRecords`].
pub(super) fn delete_acls(
    image: &MetadataImage,
    filters: &[AclBindingFilter],
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let ids: Vec<Uuid> = image
        .acls
        .iter()
        .filter(|(_, b)| filters.iter().any(|f| f.validate().is_ok() && f.matches(b)))
        .map(|(id, _)| *id)
        .collect();
    if ids.len() > ACL_RECORDS_PER_OP_MAX {
        return Err(ControllerError::TooManyAclRecords);
    }
    Ok(ids
        .into_iter()
        .map(|id| MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord { id }))
        .collect())
}

/// The answer of DeleteAcls, read from the image before the removal: per filter, the
/// bindings it matched.
pub(super) fn delete_results(
    before: &MetadataImage,
    filters: &[AclBindingFilter],
) -> Vec<Result<Vec<AclBinding>, InvalidAcl>> {
    filters
        .iter()
        .map(|f| {
            f.validate()?;
            Ok(before
                .acls
                .values()
                .filter(|b| f.matches(b))
                .cloned()
                .collect())
        })
        .collect()
}
