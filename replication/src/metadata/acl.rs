//! Access control lists as KRaft keeps them (KIP-801's `StandardAuthorizer`): an [`AclBinding`]
//! (resource pattern + entry) is created by [`super::ControllerOp::CreateAcls`], carried by an
//! `AccessControlEntryRecord` with an id, and removed by id. The codes are Kafka's wire codes
//! (`ResourceType`, `PatternType`, `AclOperation`, `AclPermissionType`), so a binding decodes
//! from and encodes to the ACL APIs (29–31) without translation.
//!
//! [`AclBindingFilter::matches`] is Kafka's `AclBindingFilter.matches` (DescribeAcls and
//! DeleteAcls); [`validate_new`] is `AclControlManager.validateNewAcl` plus the broker's
//! checks of `AclApis` (the cluster resource's name, the principal's form).

use serde::{Deserialize, Serialize};

/// Kafka's `ResourceType.ANY` (filters only).
pub const RESOURCE_ANY: i8 = 1;
/// Kafka's `ResourceType.TOPIC`.
pub const RESOURCE_TOPIC: i8 = 2;
/// Kafka's `ResourceType.GROUP`.
pub const RESOURCE_GROUP: i8 = 3;
/// Kafka's `ResourceType.CLUSTER` (one resource, named [`CLUSTER_NAME`]).
pub const RESOURCE_CLUSTER: i8 = 4;
/// Kafka's `ResourceType.TRANSACTIONAL_ID`.
pub const RESOURCE_TRANSACTIONAL_ID: i8 = 5;
/// Kafka's `ResourceType.DELEGATION_TOKEN`.
pub const RESOURCE_DELEGATION_TOKEN: i8 = 6;
/// Kafka's `ResourceType.USER`.
pub const RESOURCE_USER: i8 = 7;

/// Kafka's `PatternType.ANY` (filters only: any pattern type).
pub const PATTERN_ANY: i8 = 1;
/// Kafka's `PatternType.MATCH` (filters only: the patterns that would match the name).
pub const PATTERN_MATCH: i8 = 2;
/// Kafka's `PatternType.LITERAL`: the name itself, or every name when it is [`WILDCARD`].
pub const PATTERN_LITERAL: i8 = 3;
/// Kafka's `PatternType.PREFIXED`: every name that starts with it.
pub const PATTERN_PREFIXED: i8 = 4;

/// Kafka's `AclPermissionType.ANY` (filters only).
pub const PERMISSION_ANY: i8 = 1;
/// Kafka's `AclPermissionType.DENY`.
pub const PERMISSION_DENY: i8 = 2;
/// Kafka's `AclPermissionType.ALLOW`.
pub const PERMISSION_ALLOW: i8 = 3;

/// The name of the one cluster resource (Kafka's `Resource.CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A literal resource name, principal or host matching every one (Kafka's `WILDCARD_RESOURCE`
/// and `AclEntry.WILDCARD_HOST`).
pub const WILDCARD: &str = "*";
/// The principal matching every principal (Kafka's `AclEntry.WILDCARD_PRINCIPAL_STRING`).
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// Kafka's `AclOperation`, with its wire codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AclOperation {
    /// 1: filters only.
    Any = 1,
    All = 2,
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
    TwoPhaseCommit = 15,
}

impl AclOperation {
    /// The operation of wire code `code`; `None` for UNKNOWN (0) and codes Kafka does not
    /// define.
    pub fn from_code(code: i8) -> Option<Self> {
        use AclOperation::*;
        Some(match code {
            1 => Any,
            2 => All,
            3 => Read,
            4 => Write,
            5 => Create,
            6 => Delete,
            7 => Alter,
            8 => Describe,
            9 => ClusterAction,
            10 => DescribeConfigs,
            11 => AlterConfigs,
            12 => IdempotentWrite,
            13 => CreateTokens,
            14 => DescribeTokens,
            15 => TwoPhaseCommit,
            _ => return None,
        })
    }

    /// The wire code.
    pub fn code(self) -> i8 {
        self as i8
    }
}

/// One ACL: who (`principal` from `host`) may or may not (`permission_type`) do `operation`
/// on the resources that `(resource_type, resource_name, pattern_type)` names. Codes are
/// Kafka's; a stored binding has passed [`validate_new`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    /// `Type:name`, e.g. `User:alice`, or [`WILDCARD_PRINCIPAL`].
    pub principal: String,
    /// A client address (`1.2.3.4`) or [`WILDCARD`].
    pub host: String,
    pub operation: AclOperation,
    pub permission_type: i8,
}

/// A DescribeAcls / DeleteAcls filter: `None` strings and the ANY codes match everything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclBindingFilter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    /// `None`: an operation code Kafka does not know (UNKNOWN), refused by
    /// [`AclBindingFilter::validate`].
    pub operation: Option<AclOperation>,
    pub permission_type: i8,
}

/// Why an ACL creation or a filter is refused: Kafka answers each with INVALID_REQUEST (42)
/// and this message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{0}")]
pub struct InvalidAcl(pub String);

/// Checks a binding to be created as Kafka does (`AclControlManager.validateNewAcl` and the
/// broker's `AclApis`): a concrete resource type, LITERAL or PREFIXED, a concrete operation and
/// permission, a non-empty name, `kafka-cluster` as the cluster's name, a `Type:name`
/// principal and a non-empty host. Errors: [`InvalidAcl`] naming the first failed check.
pub fn validate_new(b: &AclBinding) -> Result<(), InvalidAcl> {
    let invalid = |m: String| Err(InvalidAcl(m));
    if !(RESOURCE_TOPIC..=RESOURCE_USER).contains(&b.resource_type) {
        return invalid(format!("Invalid resourceType {}", b.resource_type));
    }
    if b.pattern_type != PATTERN_LITERAL && b.pattern_type != PATTERN_PREFIXED {
        return invalid(format!("Invalid patternType {}", b.pattern_type));
    }
    if b.operation == AclOperation::Any {
        return invalid(format!("Invalid operation {:?}", b.operation));
    }
    if b.permission_type != PERMISSION_ALLOW && b.permission_type != PERMISSION_DENY {
        return invalid(format!("Invalid permissionType {}", b.permission_type));
    }
    if b.resource_name.is_empty() {
        return invalid("Resource name should not be empty".to_string());
    }
    if b.resource_type == RESOURCE_CLUSTER && b.resource_name != CLUSTER_NAME {
        return invalid("The only valid name for the CLUSTER resource is kafka-cluster".into());
    }
    match b.principal.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
        _ => return invalid(format!("Invalid ACL principal name {:?}", b.principal)),
    }
    if b.host.is_empty() {
        return invalid("Invalid ACL host: an empty host".to_string());
    }
    Ok(())
}

impl AclBindingFilter {
    /// Kafka's `AclControlManager.validateFilter`: a filter with an unknown code matches
    /// nothing Kafka could name, so it is refused. Errors: [`InvalidAcl`].
    pub fn validate(&self) -> Result<(), InvalidAcl> {
        if !(RESOURCE_ANY..=RESOURCE_USER).contains(&self.resource_type)
            || !(PATTERN_ANY..=PATTERN_PREFIXED).contains(&self.pattern_type)
        {
            return Err(InvalidAcl("Unknown patternFilter.".to_string()));
        }
        if self.operation.is_none()
            || !(PERMISSION_ANY..=PERMISSION_ALLOW).contains(&self.permission_type)
        {
            return Err(InvalidAcl("Unknown entryFilter.".to_string()));
        }
        Ok(())
    }

    /// Whether the filter matches `b` (Kafka's `AclBindingFilter.matches`): the pattern part
    /// as `ResourcePatternFilter.matches` (MATCH takes the literal name, the wildcard and the
    /// prefixes of the filter's name), the entry part field by field.
    pub fn matches(&self, b: &AclBinding) -> bool {
        self.matches_pattern(b) && self.matches_entry(b)
    }

    fn matches_pattern(&self, b: &AclBinding) -> bool {
        if self.resource_type != RESOURCE_ANY && self.resource_type != b.resource_type {
            return false;
        }
        if self.pattern_type != PATTERN_ANY
            && self.pattern_type != PATTERN_MATCH
            && self.pattern_type != b.pattern_type
        {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == PATTERN_ANY
            || (self.pattern_type == b.pattern_type && self.pattern_type != PATTERN_MATCH)
        {
            return *name == b.resource_name;
        }
        // MATCH: the patterns that would match `name`.
        match b.pattern_type {
            PATTERN_LITERAL => *name == b.resource_name || b.resource_name == WILDCARD,
            PATTERN_PREFIXED => name.starts_with(&b.resource_name),
            _ => false,
        }
    }

    fn matches_entry(&self, b: &AclBinding) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == b.principal)
            && self.host.as_ref().is_none_or(|h| *h == b.host)
            && self
                .operation
                .is_some_and(|op| op == AclOperation::Any || op == b.operation)
            && (self.permission_type == PERMISSION_ANY || self.permission_type == b.permission_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(resource_type: i8, name: &str, pattern_type: i8) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: name.to_string(),
            pattern_type,
            principal: "User:alice".to_string(),
            host: WILDCARD.to_string(),
            operation: AclOperation::Read,
            permission_type: PERMISSION_ALLOW,
        }
    }

    fn filter_all() -> AclBindingFilter {
        AclBindingFilter {
            resource_type: RESOURCE_ANY,
            resource_name: None,
            pattern_type: PATTERN_ANY,
            principal: None,
            host: None,
            operation: Some(AclOperation::Any),
            permission_type: PERMISSION_ANY,
        }
    }

    #[test]
    fn validation_refuses_what_kafka_refuses() {
        assert!(validate_new(&binding(RESOURCE_TOPIC, "t", PATTERN_LITERAL)).is_ok());
        assert!(validate_new(&binding(RESOURCE_ANY, "t", PATTERN_LITERAL)).is_err());
        assert!(validate_new(&binding(RESOURCE_TOPIC, "t", PATTERN_MATCH)).is_err());
        assert!(validate_new(&binding(RESOURCE_TOPIC, "", PATTERN_LITERAL)).is_err());
        assert!(validate_new(&binding(RESOURCE_CLUSTER, "c", PATTERN_LITERAL)).is_err());
        assert!(validate_new(&binding(RESOURCE_CLUSTER, CLUSTER_NAME, PATTERN_LITERAL)).is_ok());
        let mut b = binding(RESOURCE_TOPIC, "t", PATTERN_LITERAL);
        b.principal = "alice".to_string();
        assert!(validate_new(&b).is_err());
        b.principal = "User:alice".to_string();
        b.operation = AclOperation::Any;
        assert!(validate_new(&b).is_err());
        b.operation = AclOperation::Write;
        b.permission_type = PERMISSION_ANY;
        assert!(validate_new(&b).is_err());
    }

    #[test]
    fn filters_match_as_kafka() {
        let literal = binding(RESOURCE_TOPIC, "orders", PATTERN_LITERAL);
        let wildcard = binding(RESOURCE_TOPIC, WILDCARD, PATTERN_LITERAL);
        let prefixed = binding(RESOURCE_TOPIC, "ord", PATTERN_PREFIXED);
        let group = binding(RESOURCE_GROUP, "orders", PATTERN_LITERAL);
        let all = filter_all();
        for b in [&literal, &wildcard, &prefixed, &group] {
            assert!(all.matches(b));
        }
        let mut f = filter_all();
        f.resource_type = RESOURCE_TOPIC;
        f.resource_name = Some("orders".to_string());
        f.pattern_type = PATTERN_MATCH;
        assert!(f.matches(&literal) && f.matches(&wildcard) && f.matches(&prefixed));
        assert!(!f.matches(&group));
        f.pattern_type = PATTERN_LITERAL;
        assert!(f.matches(&literal) && !f.matches(&wildcard) && !f.matches(&prefixed));
        f.pattern_type = PATTERN_ANY;
        assert!(f.matches(&literal) && !f.matches(&wildcard) && !f.matches(&prefixed));
        f.principal = Some("User:bob".to_string());
        assert!(!f.matches(&literal));
        let mut f = filter_all();
        f.operation = Some(AclOperation::Write);
        assert!(!f.matches(&literal));
        f.operation = None;
        assert!(f.validate().is_err() && !f.matches(&literal));
    }
}
