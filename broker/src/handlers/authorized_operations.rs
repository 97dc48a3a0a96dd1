//! KIP-430 authorized operations, as Kafka reports them without an authorizer
//! (`AuthHelper.authorizedOperations`): every operation the resource type supports
//! (`AclEntry.supportedOperations`), as a bit field of ACL operation codes, when the request
//! asks for them; `i32::MIN` ("omitted") when it does not.

/// ACL operation codes (`AclOperation`): READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7,
/// DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
const READ: i32 = 3;
const WRITE: i32 = 4;
const CREATE: i32 = 5;
const DELETE: i32 = 6;
const ALTER: i32 = 7;
const DESCRIBE: i32 = 8;
const CLUSTER_ACTION: i32 = 9;
const DESCRIBE_CONFIGS: i32 = 10;
const ALTER_CONFIGS: i32 = 11;
const IDEMPOTENT_WRITE: i32 = 12;

const fn bits(ops: &[i32]) -> i32 {
    let mut field = 0;
    let mut i = 0;
    while i < ops.len() {
        field |= 1 << ops[i];
        i += 1;
    }
    field
}

/// A topic's operations.
pub const TOPIC: i32 = bits(&[
    READ,
    WRITE,
    CREATE,
    DELETE,
    ALTER,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
]);
/// The cluster's operations.
pub const CLUSTER: i32 = bits(&[
    CREATE,
    ALTER,
    DESCRIBE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
]);
/// A consumer group's operations (with KIP-848's group configs, as Kafka 4 reports them).
pub const GROUP: i32 = bits(&[READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]);

/// The field to answer: `ops` when `requested`, else Kafka's "omitted" marker.
pub fn reported(requested: bool, ops: i32) -> i32 {
    if requested {
        ops
    } else {
        i32::MIN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_fields_match_kafkas() {
        // As a Kafka 4.4 broker without an authorizer reports them.
        assert_eq!(TOPIC, 3576);
        assert_eq!(CLUSTER, 8096);
        assert_eq!(GROUP, 3400);
        assert_eq!(reported(false, TOPIC), i32::MIN);
    }
}
