//! The ACL decision of Kafka's `StandardAuthorizer` (KIP-801), pure: super users are allowed
//! everything; otherwise the ACLs on the resource — its literal name, the literal wildcard
//! `*`, and every PREFIXED pattern its name starts with — decide: a matching DENY wins, then a
//! matching ALLOW; with no ACL on the resource at all the answer is
//! `allow.everyone.if.no.acl.found`, and with ACLs on it but none matching, DENIED.
//!
//! An ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE, and an ALLOW of ALTER_CONFIGS
//! implies DESCRIBE_CONFIGS; a DENY implies nothing (`StandardAuthorizerData.findResult`).
//! Principals match exactly or through `User:*`; hosts exactly or through `*`.

use super::acl::{
    AclBinding, AclOperation, PATTERN_LITERAL, PATTERN_PREFIXED, PERMISSION_ALLOW, PERMISSION_DENY,
    WILDCARD, WILDCARD_PRINCIPAL,
};
use std::collections::HashMap;

/// The authorizer's settings (Kafka's broker keys).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerConfig<'a> {
    /// `super.users`: principals (`User:admin`) allowed everything, ACLs or not.
    pub super_users: &'a [String],
    /// `allow.everyone.if.no.acl.found` (default false): the answer for a resource no ACL
    /// names.
    pub allow_everyone_if_no_acl_found: bool,
}

/// Who asks: the connection's principal (`User:alice`, `User:ANONYMOUS` on an unauthenticated
/// listener) and its client address (`127.0.0.1`, no leading slash).
#[derive(Clone, Copy, Debug)]
pub struct Requester<'a> {
    pub principal: &'a str,
    pub host: &'a str,
}

/// The ACLs indexed for decisions: by (resource type, name) for LITERAL patterns (the
/// wildcard among them) and for PREFIXED ones, so one decision costs a lookup per prefix
/// length of the resource name, not a scan of every ACL.
#[derive(Clone, Debug, Default)]
pub struct AclIndex {
    literal: HashMap<(i8, String), Vec<AclBinding>>,
    prefixed: HashMap<(i8, String), Vec<AclBinding>>,
    /// Longest PREFIXED pattern per resource type, bytes: prefixes longer are not looked up.
    longest_prefix_bytes: HashMap<i8, usize>,
}

impl AclIndex {
    /// Indexes `acls` (bindings that passed [`super::acl::validate_new`]).
    pub fn new<'a>(acls: impl IntoIterator<Item = &'a AclBinding>) -> Self {
        let mut index = AclIndex::default();
        for b in acls {
            let key = (b.resource_type, b.resource_name.clone());
            match b.pattern_type {
                PATTERN_LITERAL => index.literal.entry(key).or_default().push(b.clone()),
                PATTERN_PREFIXED => {
                    let longest = index
                        .longest_prefix_bytes
                        .entry(b.resource_type)
                        .or_default();
                    *longest = (*longest).max(b.resource_name.len());
                    index.prefixed.entry(key).or_default().push(b.clone());
                }
                _ => {}
            }
        }
        index
    }

    /// Whether `who` may do `operation` on the resource `(resource_type, name)` (a literal
    /// resource, as every request names one).
    pub fn authorize(
        &self,
        config: AuthorizerConfig<'_>,
        who: Requester<'_>,
        operation: AclOperation,
        resource_type: i8,
        name: &str,
    ) -> bool {
        if config.super_users.iter().any(|s| s == who.principal) {
            return true;
        }
        let mut found_acl = false;
        let mut allowed = false;
        for acl in self.acls_on(resource_type, name) {
            found_acl = true;
            match decide(acl, who, operation) {
                Some(false) => return false,
                Some(true) => allowed = true,
                None => {}
            }
        }
        if found_acl {
            allowed
        } else {
            config.allow_everyone_if_no_acl_found
        }
    }

    /// Whether `who` may do `operation` on some resource of `resource_type` (Kafka's
    /// `Authorizer.authorizeByResourceType`, used by InitProducerId for an idempotent
    /// producer): allowed when it may on a resource no ACL names (super users, or
    /// `allow.everyone.if.no.acl.found`), or when one of its ALLOW patterns is not covered by
    /// one of its DENY patterns (a DENY of the literal wildcard covers everything).
    pub fn authorize_any(
        &self,
        config: AuthorizerConfig<'_>,
        who: Requester<'_>,
        operation: AclOperation,
        resource_type: i8,
    ) -> bool {
        if self.authorize(config, who, operation, resource_type, "hardcode") {
            return true;
        }
        let applies = |b: &AclBinding| {
            (b.principal == who.principal || b.principal == WILDCARD_PRINCIPAL)
                && (b.host == WILDCARD || b.host == who.host)
                && (b.operation == operation || b.operation == AclOperation::All)
        };
        let of_type = |map: &'_ HashMap<(i8, String), Vec<AclBinding>>| {
            map.iter()
                .filter(move |((t, _), _)| *t == resource_type)
                .flat_map(|(_, v)| v.iter())
                .filter(|b| applies(b))
                .map(|b| (b.permission_type, b.resource_name.clone()))
                .collect::<Vec<_>>()
        };
        let literal = of_type(&self.literal);
        let prefixed = of_type(&self.prefixed);
        let denied = |list: &[(i8, String)]| -> Vec<String> {
            list.iter()
                .filter(|(p, _)| *p == PERMISSION_DENY)
                .map(|(_, n)| n.clone())
                .collect()
        };
        let (deny_literal, deny_prefix) = (denied(&literal), denied(&prefixed));
        if deny_literal.iter().any(|n| n == WILDCARD) {
            return false;
        }
        let allowed = |list: &[(i8, String)]| -> Vec<String> {
            list.iter()
                .filter(|(p, _)| *p == PERMISSION_ALLOW)
                .map(|(_, n)| n.clone())
                .collect()
        };
        let covered = |name: &str| deny_prefix.iter().any(|d| name.starts_with(d.as_str()));
        allowed(&literal)
            .iter()
            .any(|n| !deny_literal.contains(n) && !covered(n))
            || allowed(&prefixed).iter().any(|n| !covered(n))
    }

    /// The ACLs whose pattern covers the resource `(resource_type, name)`.
    fn acls_on<'a>(
        &'a self,
        resource_type: i8,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AclBinding> {
        let literal = [name, WILDCARD]
            .into_iter()
            .filter_map(move |n| self.literal.get(&(resource_type, n.to_string())))
            .flatten();
        let longest = self
            .longest_prefix_bytes
            .get(&resource_type)
            .copied()
            .unwrap_or(0);
        let prefixed = (1..=name.len().min(longest))
            .filter(move |&end| name.is_char_boundary(end))
            .filter_map(move |end| self.prefixed.get(&(resource_type, name[..end].to_string())))
            .flatten();
        literal.chain(prefixed)
    }
}

/// One ACL's verdict on the request: `None` when it does not apply (another principal, host
/// or operation), `Some(true)` for an ALLOW, `Some(false)` for a DENY.
fn decide(acl: &AclBinding, who: Requester<'_>, operation: AclOperation) -> Option<bool> {
    if acl.principal != who.principal && acl.principal != WILDCARD_PRINCIPAL {
        return None;
    }
    if acl.host != WILDCARD && acl.host != who.host {
        return None;
    }
    let allow = acl.permission_type == PERMISSION_ALLOW;
    if acl.operation != AclOperation::All {
        let applies = if allow {
            match operation {
                AclOperation::Describe => matches!(
                    acl.operation,
                    AclOperation::Describe
                        | AclOperation::Read
                        | AclOperation::Write
                        | AclOperation::Delete
                        | AclOperation::Alter
                ),
                AclOperation::DescribeConfigs => matches!(
                    acl.operation,
                    AclOperation::DescribeConfigs | AclOperation::AlterConfigs
                ),
                _ => acl.operation == operation,
            }
        } else {
            acl.operation == operation
        };
        if !applies {
            return None;
        }
    }
    debug_assert!(allow || acl.permission_type == PERMISSION_DENY);
    Some(allow)
}

#[cfg(test)]
mod tests {
    use super::super::acl::{PERMISSION_DENY, RESOURCE_GROUP, RESOURCE_TOPIC};
    use super::*;

    fn acl(name: &str, pattern: i8, principal: &str, op: AclOperation, perm: i8) -> AclBinding {
        AclBinding {
            resource_type: RESOURCE_TOPIC,
            resource_name: name.to_string(),
            pattern_type: pattern,
            principal: principal.to_string(),
            host: WILDCARD.to_string(),
            operation: op,
            permission_type: perm,
        }
    }

    const ALICE: Requester<'static> = Requester {
        principal: "User:alice",
        host: "10.0.0.1",
    };

    #[test]
    fn no_acl_follows_allow_everyone() {
        let index = AclIndex::new([]);
        let mut config = AuthorizerConfig::default();
        assert!(!index.authorize(config, ALICE, AclOperation::Read, RESOURCE_TOPIC, "t"));
        config.allow_everyone_if_no_acl_found = true;
        assert!(index.authorize(config, ALICE, AclOperation::Read, RESOURCE_TOPIC, "t"));
        // An ACL on the resource for someone else: denied even with allow-everyone.
        let other = acl(
            "t",
            PATTERN_LITERAL,
            "User:bob",
            AclOperation::Read,
            PERMISSION_ALLOW,
        );
        let index = AclIndex::new([&other]);
        assert!(!index.authorize(config, ALICE, AclOperation::Read, RESOURCE_TOPIC, "t"));
        assert!(index.authorize(config, ALICE, AclOperation::Read, RESOURCE_TOPIC, "u"));
    }

    #[test]
    fn super_users_and_deny_first() {
        let allow = acl(
            "orders",
            PATTERN_PREFIXED,
            WILDCARD_PRINCIPAL,
            AclOperation::All,
            PERMISSION_ALLOW,
        );
        let deny = acl(
            "orders-eu",
            PATTERN_LITERAL,
            "User:alice",
            AclOperation::Write,
            PERMISSION_DENY,
        );
        let index = AclIndex::new([&allow, &deny]);
        let mut config = AuthorizerConfig::default();
        assert!(index.authorize(
            config,
            ALICE,
            AclOperation::Write,
            RESOURCE_TOPIC,
            "orders-us"
        ));
        assert!(!index.authorize(
            config,
            ALICE,
            AclOperation::Write,
            RESOURCE_TOPIC,
            "orders-eu"
        ));
        assert!(index.authorize(
            config,
            ALICE,
            AclOperation::Read,
            RESOURCE_TOPIC,
            "orders-eu"
        ));
        assert!(!index.authorize(
            config,
            ALICE,
            AclOperation::Write,
            RESOURCE_GROUP,
            "orders-us"
        ));
        let supers = ["User:admin".to_string(), "User:alice".to_string()];
        config.super_users = &supers;
        assert!(index.authorize(
            config,
            ALICE,
            AclOperation::Write,
            RESOURCE_TOPIC,
            "orders-eu"
        ));
    }

    #[test]
    fn implied_operations_only_for_allow() {
        let read = acl(
            "t",
            PATTERN_LITERAL,
            "User:alice",
            AclOperation::Read,
            PERMISSION_ALLOW,
        );
        let index = AclIndex::new([&read]);
        let config = AuthorizerConfig::default();
        assert!(index.authorize(config, ALICE, AclOperation::Describe, RESOURCE_TOPIC, "t"));
        assert!(!index.authorize(config, ALICE, AclOperation::Write, RESOURCE_TOPIC, "t"));
        let alter = acl(
            "t",
            PATTERN_LITERAL,
            "User:alice",
            AclOperation::AlterConfigs,
            PERMISSION_ALLOW,
        );
        let index = AclIndex::new([&alter]);
        assert!(index.authorize(
            config,
            ALICE,
            AclOperation::DescribeConfigs,
            RESOURCE_TOPIC,
            "t"
        ));
        // A DENY of READ does not deny DESCRIBE.
        let deny = acl(
            "t",
            PATTERN_LITERAL,
            "User:alice",
            AclOperation::Read,
            PERMISSION_DENY,
        );
        let describe = acl(
            "t",
            PATTERN_LITERAL,
            "User:alice",
            AclOperation::Describe,
            PERMISSION_ALLOW,
        );
        let index = AclIndex::new([&deny, &describe]);
        assert!(index.authorize(config, ALICE, AclOperation::Describe, RESOURCE_TOPIC, "t"));
        assert!(!index.authorize(config, ALICE, AclOperation::Read, RESOURCE_TOPIC, "t"));
    }

    #[test]
    fn any_resource_of_a_type_as_kafkas_authorize_by_resource_type() {
        let config = AuthorizerConfig::default();
        let w = AclOperation::Write;
        let allow = acl(
            "orders",
            PATTERN_PREFIXED,
            "User:alice",
            w,
            PERMISSION_ALLOW,
        );
        let index = AclIndex::new([&allow]);
        assert!(index.authorize_any(config, ALICE, w, RESOURCE_TOPIC));
        assert!(!index.authorize_any(config, ALICE, AclOperation::Read, RESOURCE_TOPIC));
        let deny = acl("ord", PATTERN_PREFIXED, "User:alice", w, PERMISSION_DENY);
        let index = AclIndex::new([&allow, &deny]);
        assert!(
            !index.authorize_any(config, ALICE, w, RESOURCE_TOPIC),
            "covered by the deny"
        );
        let everyone = AuthorizerConfig {
            allow_everyone_if_no_acl_found: true,
            ..config
        };
        assert!(AclIndex::new([]).authorize_any(everyone, ALICE, w, RESOURCE_TOPIC));
    }

    #[test]
    fn hosts_and_wildcard_resource() {
        let mut a = acl(
            WILDCARD,
            PATTERN_LITERAL,
            "User:alice",
            AclOperation::Read,
            PERMISSION_ALLOW,
        );
        a.host = "10.0.0.2".to_string();
        let index = AclIndex::new([&a]);
        let config = AuthorizerConfig::default();
        assert!(!index.authorize(config, ALICE, AclOperation::Read, RESOURCE_TOPIC, "x"));
        let far = Requester {
            principal: "User:alice",
            host: "10.0.0.2",
        };
        assert!(index.authorize(config, far, AclOperation::Read, RESOURCE_TOPIC, "x"));
    }
}
