//! AlterPartitionReassignments (key 45), v0–1 (KIP-455; v1 adds
//! `allow_replication_factor_change`): the active controller moves each named partition to
//! its target replicas (`replication::metadata::ControllerOp::AlterPartitionReassignments`, as
//! KRaft's `ReplicationControlManager::alterPartitionReassignments`), or cancels the
//! reassignment in progress when the target is null; a broker that is not the controller
//! forwards the request to it. The answer comes once the first step is committed: the added
//! replicas are then created on their brokers and fetch from the leader, and the leader's
//! AlterPartition that takes the last of them into the ISR completes the move (see
//! `replication::metadata`'s `propose/reassignments.rs`).
//!
//! Per partition, Kafka's codes: `UNKNOWN_TOPIC_OR_PARTITION` (3), `NO_REASSIGNMENT_IN_PROGRESS`
//! (85) for a cancellation with none, `INVALID_REPLICA_ASSIGNMENT` (39) for an empty target, a
//! broker named twice or not registered, or a cancellation that needs an unclean election,
//! `INVALID_REPLICATION_FACTOR` (38) when v1 forbids a change of the replica count. CLUSTER
//! ALTER is required (else `CLUSTER_AUTHORIZATION_FAILED` at the top and on every partition,
//! as Kafka's `getErrorResponse`); so is any controller failure. Limit: `timeout_ms` is not
//! used (the controller's own proposal timeout, 15 s, applies).

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error, reassignment_error_code};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::alter_partition_reassignments_request::ReassignableTopic;
use net::kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use net::kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use replication::metadata::{ControllerAnswer, ControllerOp, TopicReassignmentResults};
use std::rc::Rc;

/// First version with `allow_replication_factor_change` (before it, always allowed).
const ALLOW_REPLICATION_FACTOR_CHANGE_MIN_VERSION: i16 = 1;

/// Runs the reassignments on the active controller and answers per partition.
pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    let mut response = if authz::cluster(shard, session, AclOperation::Alter) {
        run(shard, &req, version).await
    } else {
        let error = (
            code(ResponseError::ClusterAuthorizationFailed),
            "Cluster authorization failed.".to_string(),
        );
        error_response(&req.topics, error)
    };
    if version >= ALLOW_REPLICATION_FACTOR_CHANGE_MIN_VERSION {
        response.allow_replication_factor_change = req.allow_replication_factor_change;
    }
    response
}

async fn run(
    shard: &Rc<Shard>,
    req: &AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let target = p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
                    (p.partition_index, target)
                })
                .collect();
            (t.name.0.to_string(), partitions)
        })
        .collect();
    let op = ControllerOp::AlterPartitionReassignments {
        topics,
        allow_replication_factor_change: version < ALLOW_REPLICATION_FACTOR_CHANGE_MIN_VERSION
            || req.allow_replication_factor_change,
    };
    match crate::controller::call_answer(shard, op).await {
        Ok(ControllerAnswer::AlterPartitionReassignments { results }) => response(results),
        Ok(other) => {
            tracing::warn!(answer = ?other, "AlterPartitionReassignments: unexpected answer");
            let error = (
                code(ResponseError::UnknownServerError),
                format!("unexpected controller answer {other:?}"),
            );
            error_response(&req.topics, error)
        }
        Err(e) => error_response(&req.topics, controller_error(&e)),
    }
}

/// The controller's results on the wire: no message on success, Kafka's otherwise.
fn response(results: Vec<TopicReassignmentResults>) -> AlterPartitionReassignmentsResponse {
    let mut response = AlterPartitionReassignmentsResponse::default();
    response.error_message = None;
    for topic in results {
        let mut out = ReassignableTopicResponse::default();
        out.name = super::wire::topic_name(&topic.topic);
        for (partition, result) in topic.partitions {
            let mut r = ReassignablePartitionResponse::default();
            r.partition_index = partition;
            r.error_message = None;
            if let Err(e) = result {
                r.error_code = reassignment_error_code(&e);
                r.error_message = Some(str_bytes(e.to_string()));
            }
            out.partitions.push(r);
        }
        response.responses.push(out);
    }
    response
}

/// `error` at the top and on every partition of the request (Kafka's
/// `AlterPartitionReassignmentsRequest::getErrorResponse`).
fn error_response(
    topics: &[ReassignableTopic],
    (error_code, message): (i16, String),
) -> AlterPartitionReassignmentsResponse {
    let mut response = AlterPartitionReassignmentsResponse::default();
    response.error_code = error_code;
    response.error_message = Some(str_bytes(message.clone()));
    for topic in topics {
        let mut out = ReassignableTopicResponse::default();
        out.name = topic.name.clone();
        for p in &topic.partitions {
            let mut r = ReassignablePartitionResponse::default();
            r.partition_index = p.partition_index;
            r.error_code = error_code;
            r.error_message = Some(str_bytes(message.clone()));
            out.partitions.push(r);
        }
        response.responses.push(out);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use net::kafka_protocol::protocol::Encodable;
    use replication::metadata::ReassignmentError;

    fn codes(r: &AlterPartitionReassignmentsResponse) -> Vec<(String, i32, i16, Option<String>)> {
        r.responses
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
            .map(|(t, p)| {
                let message = p.error_message.as_ref().map(|m| m.to_string());
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.error_code,
                    message,
                )
            })
            .collect()
    }

    #[test]
    fn results_carry_kafkas_codes_and_messages_and_none_on_success() {
        let results = vec![TopicReassignmentResults {
            topic: "t".into(),
            partitions: vec![
                (0, Ok(())),
                (1, Err(ReassignmentError::NoReassignmentInProgress)),
                (
                    2,
                    Err(ReassignmentError::InvalidReplicaAssignment {
                        reason: "bad".into(),
                    }),
                ),
                (
                    3,
                    Err(ReassignmentError::UnknownPartition {
                        topic: "t".into(),
                        partition: 3,
                    }),
                ),
                (
                    4,
                    Err(ReassignmentError::InvalidReplicationFactor {
                        current: 2,
                        target: 3,
                    }),
                ),
            ],
        }];
        let r = response(results);
        assert_eq!((r.error_code, r.error_message.clone()), (0, None));
        let t = || "t".to_string();
        let text = |s: &str| Some(s.to_string());
        assert_eq!(
            codes(&r),
            [
                (t(), 0, 0, None),
                (
                    t(),
                    1,
                    85,
                    text("No partition reassignment is in progress.")
                ),
                (t(), 2, 39, text("bad")),
                (t(), 3, 3, text("Unable to find partition t:3.")),
                (
                    t(),
                    4,
                    38,
                    text(
                        "The replication factor is changed from 2 to 3 but \
                         allowReplicationFactorChange is false."
                    )
                ),
            ]
        );
        for version in 0..=1 {
            r.encode(&mut bytes::BytesMut::new(), version)
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
        }
    }

    #[test]
    fn an_error_is_at_the_top_and_on_every_partition() {
        let mut topic = ReassignableTopic::default();
        topic.name = super::super::wire::topic_name("t");
        for p in [0, 5] {
            let mut partition =
                net::kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition::default();
            partition.partition_index = p;
            topic.partitions.push(partition);
        }
        let r = error_response(&[topic], (31, "denied".into()));
        assert_eq!(r.error_code, 31);
        let denied = Some("denied".to_string());
        assert_eq!(
            codes(&r),
            [
                ("t".to_string(), 0, 31, denied.clone()),
                ("t".to_string(), 5, 31, denied)
            ]
        );
    }
}
