//! The ACL APIs' wire fields ↔ `replication::metadata::acl` bindings and filters (codes are
//! Kafka's on both sides, so only strings and the operation change form).

use super::wire::str_bytes;
use net::kafka_protocol::messages::create_acls_request::AclCreation;
use net::kafka_protocol::protocol::StrBytes;
use replication::metadata::acl::{AclBinding, AclBindingFilter, AclOperation};

/// The binding a CreateAcls creation names. An unknown operation code (Kafka's UNKNOWN)
/// becomes ANY, which [`replication::metadata::acl::validate_new`] refuses as Kafka does.
pub fn binding(c: &AclCreation) -> AclBinding {
    AclBinding {
        resource_type: c.resource_type,
        resource_name: c.resource_name.to_string(),
        pattern_type: c.resource_pattern_type,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: AclOperation::from_code(c.operation).unwrap_or(AclOperation::Any),
        permission_type: c.permission_type,
    }
}

/// The filter of DescribeAcls' or a DeleteAcls filter's fields, in wire order.
pub fn filter(
    resource: (i8, Option<&StrBytes>, i8),
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission_type: i8,
) -> AclBindingFilter {
    let (resource_type, resource_name, pattern_type) = resource;
    AclBindingFilter {
        resource_type,
        resource_name: resource_name.map(ToString::to_string),
        pattern_type,
        principal: principal.map(ToString::to_string),
        host: host.map(ToString::to_string),
        operation: AclOperation::from_code(operation),
        permission_type,
    }
}

/// A binding's strings on the wire: (resource name, principal, host).
pub fn strings(b: &AclBinding) -> (StrBytes, StrBytes, StrBytes) {
    (
        str_bytes(&b.resource_name),
        str_bytes(&b.principal),
        str_bytes(&b.host),
    )
}
