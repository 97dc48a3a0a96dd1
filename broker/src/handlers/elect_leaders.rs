//! ElectLeaders (key 43), v0–2 (KIP-183; v1 adds the election type and the top-level error
//! code, KIP-460): the active controller elects the leaders
//! (`replication::metadata::ControllerOp::ElectLeaders`, as KRaft's
//! `ReplicationControlManager::electLeaders`); a broker that is not the controller forwards the
//! request to it, and a single node is a one-voter quorum on the same path.
//!
//! Preferred (0, v0's only type): the first replica of the assignment becomes leader when it
//! is registered, unfenced, not shutting down and in the ISR, with a new leader epoch.
//! Per partition: `ELECTION_NOT_NEEDED` (84) when it leads already, `PREFERRED_LEADER_NOT_
//! AVAILABLE` (80) when it is not in the ISR or not active. Unclean (1): only a partition
//! without a leader gets one, an active ISR member if any is left, else any active replica
//! (the ISR becomes just it: what only the old ISR had is lost); `ELECTION_NOT_NEEDED` when it
//! has a leader, `ELIGIBLE_LEADERS_NOT_AVAILABLE` (83) when no replica is active. An unknown
//! topic or partition is `UNKNOWN_TOPIC_OR_PARTITION`, with Kafka's messages.
//!
//! A null partition list elects every partition of every topic and, as Kafka, lists every
//! topic with only the partitions whose result is not `ELECTION_NOT_NEEDED`; an empty list is
//! answered empty at once. Another election type, or a controller that refuses or cannot be
//! reached, answers as Kafka's `ElectLeadersRequest::getErrorResponse`: the error at the top
//! (v1+; v0 has no such field) and on every named partition.
//!
//! The active controller also runs preferred elections by itself, every
//! `leader.imbalance.check.interval.seconds` (`crate::controller`'s leader balance,
//! `auto.leader.rebalance.enable`); this request, or `kafka-leader-election.sh
//! --election-type PREFERRED`, moves leaderships back at once. Limit: `timeout_ms` is not used; the controller gives up on a change after its own
//! proposal timeout (15 s) and answers `NOT_CONTROLLER`.

use super::wire::{str_bytes, topic_name};
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error, election_error_code};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use net::kafka_protocol::messages::elect_leaders_response::{
    PartitionResult, ReplicaElectionResult,
};
use net::kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use replication::metadata::{ControllerAnswer, ControllerOp, ElectionType, TopicElectionResults};
use std::rc::Rc;

/// First version with the top-level `error_code`.
const ERROR_CODE_MIN_VERSION: i16 = 1;

/// Runs the election on the active controller and answers per partition.
pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    // Kafka: ALTER on the cluster (`crate::authz`), else the error on every named partition.
    if !authz::cluster(shard, session, AclOperation::Alter) {
        return error_response(
            req.topic_partitions.as_deref(),
            (
                code(ResponseError::ClusterAuthorizationFailed),
                "Authorization failed.".to_string(),
            ),
            version,
        );
    }
    let election_type = match req.election_type {
        0 => ElectionType::Preferred,
        1 => ElectionType::Unclean,
        other => {
            let message = format!("Unknown election type {other}");
            return error_response(
                req.topic_partitions.as_deref(),
                (code(ResponseError::InvalidRequest), message),
                version,
            );
        }
    };
    if req.topic_partitions.as_ref().is_some_and(Vec::is_empty) {
        // Kafka's controller: nothing named, nothing to do.
        return ElectLeadersResponse::default();
    }
    let partitions = req.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.topic.0.to_string(), t.partitions.clone()))
            .collect()
    });
    let op = ControllerOp::ElectLeaders {
        election_type,
        partitions,
    };
    match crate::controller::call_answer(shard, op).await {
        Ok(ControllerAnswer::ElectLeaders { results }) => response(results),
        Ok(other) => {
            tracing::warn!(answer = ?other, "ElectLeaders: unexpected controller answer");
            let error = (
                code(ResponseError::UnknownServerError),
                format!("unexpected controller answer {other:?}"),
            );
            error_response(req.topic_partitions.as_deref(), error, version)
        }
        Err(e) => error_response(
            req.topic_partitions.as_deref(),
            controller_error(&e),
            version,
        ),
    }
}

/// The controller's results on the wire: no message on success, Kafka's otherwise.
fn response(results: Vec<TopicElectionResults>) -> ElectLeadersResponse {
    let mut response = ElectLeadersResponse::default();
    for topic in results {
        let mut out = ReplicaElectionResult::default();
        out.topic = topic_name(&topic.topic);
        for (partition, result) in topic.partitions {
            let mut r = PartitionResult::default();
            r.partition_id = partition;
            // Kafka's `ApiError.NONE` has a null message (the field's default is "").
            r.error_message = None;
            if let Err(e) = result {
                r.error_code = election_error_code(&e);
                r.error_message = Some(str_bytes(e.to_string()));
            }
            out.partition_result.push(r);
        }
        response.replica_election_results.push(out);
    }
    response
}

/// `error` at the top (from v1) and on every partition of `named` (Kafka's
/// `ElectLeadersRequest::getErrorResponse`).
fn error_response(
    named: Option<&[TopicPartitions]>,
    (error_code, message): (i16, String),
    version: i16,
) -> ElectLeadersResponse {
    let mut response = ElectLeadersResponse::default();
    if version >= ERROR_CODE_MIN_VERSION {
        response.error_code = error_code;
    }
    for topic in named.unwrap_or_default() {
        let mut out = ReplicaElectionResult::default();
        out.topic = topic.topic.clone();
        for &partition in &topic.partitions {
            let mut r = PartitionResult::default();
            r.partition_id = partition;
            r.error_code = error_code;
            r.error_message = Some(str_bytes(message.clone()));
            out.partition_result.push(r);
        }
        response.replica_election_results.push(out);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use net::kafka_protocol::protocol::Encodable;
    use replication::metadata::ElectionError;

    fn named(topic: &str, partitions: &[i32]) -> Vec<TopicPartitions> {
        let mut t = TopicPartitions::default();
        t.topic = topic_name(topic);
        t.partitions = partitions.to_vec();
        vec![t]
    }

    fn codes(r: &ElectLeadersResponse) -> Vec<(i32, i16, Option<String>)> {
        r.replica_election_results
            .iter()
            .flat_map(|t| &t.partition_result)
            .map(|p| {
                let message = p.error_message.as_ref().map(|m| m.to_string());
                (p.partition_id, p.error_code, message)
            })
            .collect()
    }

    #[test]
    fn an_error_is_on_every_named_partition_and_at_the_top_only_from_v1() {
        let error = (code(ResponseError::NotController), "moved".to_string());
        for version in 0..=2 {
            let r = error_response(Some(&named("t", &[0, 3])), error.clone(), version);
            let top = if version >= 1 { error.0 } else { 0 };
            assert_eq!(r.error_code, top, "v{version}");
            let message = Some("moved".to_string());
            assert_eq!(
                codes(&r),
                [(0, error.0, message.clone()), (3, error.0, message)]
            );
            // v0 has no top-level field: the response must still encode there.
            r.encode(&mut bytes::BytesMut::new(), version)
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
        }
        assert!(error_response(None, error, 1)
            .replica_election_results
            .is_empty());
    }

    #[test]
    fn results_carry_kafkas_codes_and_messages_and_none_on_success() {
        let results = vec![TopicElectionResults {
            topic: "t".into(),
            partitions: vec![
                (0, Ok(())),
                (1, Err(ElectionError::ElectionNotNeeded)),
                (2, Err(ElectionError::PreferredLeaderNotAvailable)),
                (3, Err(ElectionError::EligibleLeadersNotAvailable)),
                (
                    9,
                    Err(ElectionError::UnknownPartition {
                        topic: "t".into(),
                        partition: 9,
                    }),
                ),
            ],
        }];
        let r = response(results);
        assert_eq!(r.error_code, 0);
        let text = |s: &str| Some(s.to_string());
        assert_eq!(
            codes(&r),
            [
                (0, 0, None),
                (
                    1,
                    84,
                    text("Leader election not needed for topic partition.")
                ),
                (2, 80, text("The preferred leader was not available.")),
                (
                    3,
                    83,
                    text("Eligible topic partition leaders are not available.")
                ),
                (9, 3, text("No such partition as t-9")),
            ]
        );
    }
}
