//! KIP-430 authorized operations, as Kafka's `AuthHelper.authorizedOperations` reports them:
//! of the operations the resource type supports (`AclEntry.supportedOperations`), those the
//! principal may do (`crate::authz`; all of them without an authorizer), as a bit field of ACL
//! operation codes, when the request asks for them; `i32::MIN` ("omitted") when it does not.

use crate::authz::{self, AclOperation, CLUSTER_NAME, RESOURCE_CLUSTER, RESOURCE_GROUP};
use crate::session::Session;
use crate::shard::Shard;
use AclOperation::{
    Alter, AlterConfigs, ClusterAction, Create, Delete, Describe, DescribeConfigs, IdempotentWrite,
    Read, Write,
};

/// A resource type's supported operations.
pub struct Supported {
    resource_type: i8,
    ops: &'static [AclOperation],
}

/// A topic's operations.
pub const TOPIC: Supported = Supported {
    resource_type: authz::RESOURCE_TOPIC,
    ops: &[
        Read,
        Write,
        Create,
        Delete,
        Alter,
        Describe,
        DescribeConfigs,
        AlterConfigs,
    ],
};
/// The cluster's operations.
pub const CLUSTER: Supported = Supported {
    resource_type: RESOURCE_CLUSTER,
    ops: &[
        Create,
        Alter,
        Describe,
        ClusterAction,
        DescribeConfigs,
        AlterConfigs,
        IdempotentWrite,
    ],
};
/// A consumer group's operations (with KIP-848's group configs, as Kafka 4 reports them).
pub const GROUP: Supported = Supported {
    resource_type: RESOURCE_GROUP,
    ops: &[Read, Delete, Describe, DescribeConfigs, AlterConfigs],
};

/// The field to answer for the resource `name` of type `supported` (the cluster's name is
/// implied): the operations `session` may do when `requested`, else Kafka's "omitted" marker.
pub fn reported(
    requested: bool,
    shard: &Shard,
    session: &Session,
    supported: &Supported,
    name: &str,
) -> i32 {
    if !requested {
        return i32::MIN;
    }
    let name = if supported.resource_type == RESOURCE_CLUSTER {
        CLUSTER_NAME
    } else {
        name
    };
    supported
        .ops
        .iter()
        .filter(|op| authz::allowed(shard, session, **op, supported.resource_type, name))
        .fold(0, |field, op| field | 1 << op.code())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(s: &Supported) -> i32 {
        s.ops.iter().fold(0, |field, op| field | 1 << op.code())
    }

    #[test]
    fn bit_fields_match_kafkas() {
        // As a Kafka 4.4 broker without an authorizer reports them.
        assert_eq!(all(&TOPIC), 3576);
        assert_eq!(all(&CLUSTER), 8096);
        assert_eq!(all(&GROUP), 3400);
    }
}
