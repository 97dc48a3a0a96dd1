//! Authorization of requests (KIP-801's `StandardAuthorizer`, switched on by
//! `authorizer.class.name`): the one place handlers ask whether the connection's principal
//! may do an operation on a resource. The decision is `replication::metadata::authorizer`'s,
//! over the ACLs of this broker's metadata snapshot; without an authorizer everything is
//! allowed. Which API checks which operation is in `docs/operations.md` (Kafka's `KafkaApis`).

use crate::session::Session;
use crate::shard::Shard;
pub use replication::metadata::acl::{
    AclOperation, CLUSTER_NAME, RESOURCE_CLUSTER, RESOURCE_GROUP, RESOURCE_TOPIC,
    RESOURCE_TRANSACTIONAL_ID,
};
use replication::metadata::authorizer::{AclIndex, AuthorizerConfig, Requester};

/// Whether `session` may do `operation` on the resource `(resource_type, name)`.
pub fn allowed(
    shard: &Shard,
    session: &Session,
    operation: AclOperation,
    resource_type: i8,
    name: &str,
) -> bool {
    decide(shard, session, |index, config, who| {
        index.authorize(config, who, operation, resource_type, name)
    })
}

/// `decision` over this broker's ACLs for `session`; allowed without an authorizer.
fn decide(
    shard: &Shard,
    session: &Session,
    decision: impl FnOnce(&AclIndex, AuthorizerConfig<'_>, Requester<'_>) -> bool,
) -> bool {
    if !shard.config.authorizer_enabled {
        return true;
    }
    let config = AuthorizerConfig {
        super_users: &shard.config.super_users,
        allow_everyone_if_no_acl_found: shard.config.allow_everyone_if_no_acl_found,
    };
    let who = Requester {
        principal: &session.principal,
        host: session.host(),
    };
    decision(&shard.metadata.borrow().acl_index, config, who)
}

/// Whether `session` may WRITE some topic (Kafka's `authorizeByResourceType(WRITE, TOPIC)`,
/// which lets an idempotent producer without IDEMPOTENT_WRITE in).
pub fn any_topic_writable(shard: &Shard, session: &Session) -> bool {
    decide(shard, session, |index, config, who| {
        index.authorize_any(config, who, AclOperation::Write, RESOURCE_TOPIC)
    })
}

/// [`allowed`] on the topic `name`.
pub fn topic(shard: &Shard, session: &Session, operation: AclOperation, name: &str) -> bool {
    allowed(shard, session, operation, RESOURCE_TOPIC, name)
}

/// [`allowed`] on the group `group_id`.
pub fn group(shard: &Shard, session: &Session, operation: AclOperation, group_id: &str) -> bool {
    allowed(shard, session, operation, RESOURCE_GROUP, group_id)
}

/// [`allowed`] on the cluster.
pub fn cluster(shard: &Shard, session: &Session, operation: AclOperation) -> bool {
    allowed(shard, session, operation, RESOURCE_CLUSTER, CLUSTER_NAME)
}

/// Kafka's check of a config resource (`ConfigResource.Type` TOPIC 2 or BROKER 4) for
/// `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS): the topic, or the cluster for a broker.
/// `Some`: the error code and message to answer (TOPIC_AUTHORIZATION_FAILED,
/// CLUSTER_AUTHORIZATION_FAILED); other resource types are left to the handler.
pub fn config_resource_denied(
    shard: &Shard,
    session: &Session,
    operation: AclOperation,
    config_resource_type: i8,
    name: &str,
) -> Option<(i16, String)> {
    use net::kafka_protocol::error::ResponseError;
    let (allowed, error) = match config_resource_type {
        replication::metadata::CONFIG_RESOURCE_TOPIC => (
            topic(shard, session, operation, name),
            ResponseError::TopicAuthorizationFailed,
        ),
        replication::metadata::CONFIG_RESOURCE_BROKER => (
            cluster(shard, session, operation),
            ResponseError::ClusterAuthorizationFailed,
        ),
        _ => return None,
    };
    (!allowed).then(|| {
        (
            crate::errors::code(error),
            "Authorization failed.".to_string(),
        )
    })
}
