//! ListPartitionReassignments (key 46), v0 (KIP-455): the reassignments in progress, read from
//! this broker's metadata image (every broker applies the same records the active controller
//! commits), as KRaft's `ReplicationControlManager::listPartitionReassignments` lists them:
//! per partition its replicas (the target followed by the replicas being removed), the adding
//! and the removing replicas. A null topic list lists every partition being reassigned (topics
//! in name order); named partitions that are not being reassigned, or do not exist, are left
//! out, and so is a topic with none left. CLUSTER DESCRIBE is required (else
//! `CLUSTER_AUTHORIZATION_FAILED`, with the named partitions listed empty as Kafka's
//! `getErrorResponse`).

use super::wire::{str_bytes, topic_name};
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use net::kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use replication::metadata::{MetadataImage, TopicImage};

/// Lists the reassignments in progress that the request names (all of them for a null list).
pub fn handle(
    shard: &Shard,
    session: &Session,
    req: &ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !authz::cluster(shard, session, AclOperation::Describe) {
        return denied(req);
    }
    list(&shard.metadata().image, req)
}

/// The answer of `req` from `image`.
fn list(
    image: &MetadataImage,
    req: &ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let mut response = ListPartitionReassignmentsResponse::default();
    response.error_message = None;
    match &req.topics {
        None => {
            for (name, topic) in &image.topics {
                let all = 0..i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
                push_topic(&mut response, name, topic, all);
            }
        }
        Some(named) => {
            for t in named {
                let name = t.name.0.as_str();
                if let Some(topic) = image.topics.get(name) {
                    push_topic(
                        &mut response,
                        name,
                        topic,
                        t.partition_indexes.iter().copied(),
                    );
                }
            }
        }
    }
    response
}

/// Adds `topic`'s partitions among `ids` that are being reassigned, if any.
fn push_topic(
    response: &mut ListPartitionReassignmentsResponse,
    name: &str,
    topic: &TopicImage,
    ids: impl Iterator<Item = i32>,
) {
    let brokers = |ids: &[i32]| ids.iter().copied().map(BrokerId).collect::<Vec<_>>();
    let mut out = OngoingTopicReassignment::default();
    out.name = topic_name(name);
    for id in ids {
        let Some(p) = usize::try_from(id)
            .ok()
            .and_then(|i| topic.partitions.get(i))
        else {
            continue;
        };
        if !p.is_reassigning() {
            continue;
        }
        let mut ongoing = OngoingPartitionReassignment::default();
        ongoing.partition_index = id;
        ongoing.replicas = brokers(&p.replicas);
        ongoing.adding_replicas = brokers(&p.adding_replicas);
        ongoing.removing_replicas = brokers(&p.removing_replicas);
        out.partitions.push(ongoing);
    }
    if !out.partitions.is_empty() {
        response.topics.push(out);
    }
}

/// CLUSTER_AUTHORIZATION_FAILED with the named partitions listed empty.
fn denied(req: &ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse {
    let mut response = ListPartitionReassignmentsResponse::default();
    response.error_code = code(ResponseError::ClusterAuthorizationFailed);
    response.error_message = Some(str_bytes("Cluster authorization failed."));
    for t in req.topics.iter().flatten() {
        let mut out = OngoingTopicReassignment::default();
        out.name = t.name.clone();
        for &id in &t.partition_indexes {
            let mut p = OngoingPartitionReassignment::default();
            p.partition_index = id;
            out.partitions.push(p);
        }
        response.topics.push(out);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use net::kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
    use replication::metadata::PartitionImage;

    fn image() -> MetadataImage {
        let partition = |replicas: Vec<i32>, adding: Vec<i32>, removing: Vec<i32>| PartitionImage {
            isr: replicas.clone(),
            leader: replicas[0],
            replicas,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: adding,
            removing_replicas: removing,
        };
        let mut image = MetadataImage::new("c".into());
        for (name, partitions) in [
            (
                "a",
                vec![
                    partition(vec![1, 2], vec![], vec![]),
                    partition(vec![2, 3, 1], vec![3], vec![1]),
                ],
            ),
            ("b", vec![partition(vec![1], vec![], vec![])]),
        ] {
            let id = uuid::Uuid::new_v4();
            image.topic_names_by_id.insert(id, name.into());
            image.topics.insert(
                name.into(),
                TopicImage {
                    id,
                    internal: false,
                    partitions,
                    configs: Default::default(),
                },
            );
        }
        image
    }

    /// (topic, partition, replicas, adding, removing).
    type Listed = (String, i32, Vec<i32>, Vec<i32>, Vec<i32>);

    fn listed(r: &ListPartitionReassignmentsResponse) -> Vec<Listed> {
        let ids = |b: &[BrokerId]| b.iter().map(|b| b.0).collect::<Vec<_>>();
        r.topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
            .map(|(t, p)| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    ids(&p.replicas),
                    ids(&p.adding_replicas),
                    ids(&p.removing_replicas),
                )
            })
            .collect()
    }

    #[test]
    fn lists_only_the_partitions_being_reassigned() {
        let image = image();
        let all = list(&image, &ListPartitionReassignmentsRequest::default());
        let moving = ("a".to_string(), 1, vec![2, 3, 1], vec![3], vec![1]);
        assert_eq!(listed(&all), std::slice::from_ref(&moving));
        assert_eq!((all.error_code, all.error_message.clone()), (0, None));
        let mut req = ListPartitionReassignmentsRequest::default();
        let named = |name: &str, ids: Vec<i32>| {
            let mut t = ListPartitionReassignmentsTopics::default();
            t.name = topic_name(name);
            t.partition_indexes = ids;
            t
        };
        req.topics = Some(vec![
            named("a", vec![0, 1, 7]),
            named("b", vec![0]),
            named("nope", vec![0]),
        ]);
        let r = list(&image, &req);
        assert_eq!(listed(&r), [moving]);
        assert_eq!(r.topics.len(), 1, "topics with nothing moving are left out");
        let d = denied(&req);
        assert_eq!(d.error_code, 31);
        assert_eq!(d.topics.len(), 3);
    }
}
