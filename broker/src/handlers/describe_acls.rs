//! DescribeAcls (key 29), v1–3, as Kafka's `AclApis.handleDescribeAcls`: DESCRIBE on the
//! cluster is required (else CLUSTER_AUTHORIZATION_FAILED); without `authorizer.class.name`
//! the answer is `SECURITY_DISABLED` (54), "No Authorizer is configured on the broker";
//! with it, the ACLs of this broker's metadata that the filter matches, grouped by resource
//! pattern.

use super::acl_wire;
use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use net::kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use replication::metadata::acl::AclBinding;
use std::collections::BTreeMap;

/// Kafka's message for DescribeAcls without an authorizer.
pub const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

pub fn handle(shard: &Shard, session: &Session, req: &DescribeAclsRequest) -> DescribeAclsResponse {
    let mut response = DescribeAclsResponse::default();
    if !authz::cluster(shard, session, AclOperation::Describe) {
        response.error_code = code(ResponseError::ClusterAuthorizationFailed);
        return response;
    }
    if !shard.config.authorizer_enabled {
        response.error_code = code(ResponseError::SecurityDisabled);
        response.error_message = Some(str_bytes(NO_AUTHORIZER));
        return response;
    }
    let filter = acl_wire::filter(
        (
            req.resource_type_filter,
            req.resource_name_filter.as_ref(),
            req.pattern_type_filter,
        ),
        req.principal_filter.as_ref(),
        req.host_filter.as_ref(),
        req.operation,
        req.permission_type,
    );
    if let Err(e) = filter.validate() {
        response.error_code = code(ResponseError::InvalidRequest);
        response.error_message = Some(str_bytes(&e.0));
        return response;
    }
    let metadata = shard.metadata.borrow().clone();
    let mut by_resource: BTreeMap<(i8, &str, i8), Vec<&AclBinding>> = BTreeMap::new();
    for b in metadata.acls.values().filter(|b| filter.matches(b)) {
        by_resource
            .entry((b.resource_type, &b.resource_name, b.pattern_type))
            .or_default()
            .push(b);
    }
    response.resources = by_resource
        .into_iter()
        .map(|((resource_type, name, pattern_type), acls)| {
            let mut r = DescribeAclsResource::default();
            r.resource_type = resource_type;
            r.resource_name = str_bytes(name);
            r.pattern_type = pattern_type;
            r.acls = acls
                .into_iter()
                .map(|b| {
                    let mut d = AclDescription::default();
                    (_, d.principal, d.host) = acl_wire::strings(b);
                    d.operation = b.operation.code();
                    d.permission_type = b.permission_type;
                    d
                })
                .collect();
            r
        })
        .collect();
    response
}
