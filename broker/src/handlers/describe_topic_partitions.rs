//! DescribeTopicPartitions (key 75), v0 (KIP-966): topics and their partitions from this
//! broker's metadata image, in name order, a page at a time — what Kafka 4.x's
//! `kafka-topics.sh --describe` and the Java admin client's `describeTopics` use. As Kafka's
//! `DescribeTopicPartitionsRequestHandler` with `KRaftMetadataCache.
//! getTopicMetadataForDescribeTopicResponse`:
//!
//! - no topics named: every topic at or after the cursor's name; named topics: those at or
//!   after it (each once), and the cursor's topic must be among them;
//! - at most `max(min(response_partition_limit, `[`PARTITIONS_PER_RESPONSE_MAX`]`), 1)`
//!   partitions, from the cursor's partition for the cursor's topic and from 0 for the
//!   others; when a topic's partitions do not all fit, `next_cursor` names the first left out
//!   (and a topic that would get none names itself at partition 0);
//! - a named topic that does not exist: `UNKNOWN_TOPIC_OR_PARTITION`, or
//!   `INVALID_TOPIC_EXCEPTION` for an invalid name (listing all topics never shows one);
//! - a cursor topic that is not named, or a negative cursor partition: `INVALID_REQUEST` on
//!   every named topic (Kafka's `getErrorResponse`).
//!
//! Sluice has no eligible leader replicas (KIP-966's ELR): both lists are empty.

use super::authorized_operations;
use super::wire::topic_name;
use crate::errors::code;
use crate::metadata::LiveBroker;
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use net::kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
};
use replication::metadata::{is_internal, validate_topic_name, MetadataImage, PartitionImage};
use std::collections::BTreeSet;
use std::rc::Rc;

/// The most partitions one response carries (Kafka's `max.request.partition.size.limit`
/// default, 2000).
pub const PARTITIONS_PER_RESPONSE_MAX: i32 = 2000;

/// Answers from this broker's metadata image, with the topics the session may DESCRIBE
/// (`crate::authz`, as Kafka's handler: the others are left out of a listing of every topic,
/// and a named one answers TOPIC_AUTHORIZATION_FAILED) and its KIP-430 operations on each.
pub fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: &DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let meta = shard.metadata();
    let live = crate::metadata::live_brokers(&meta, &shard.config, &session.listener);
    let operations = |name: &str| {
        crate::authz::topic(shard, session, crate::authz::AclOperation::Describe, name).then(|| {
            let topic = &authorized_operations::TOPIC;
            authorized_operations::reported(true, shard, session, topic, name)
        })
    };
    describe(&meta, &live, req, &operations)
}

/// The answer to `req` over `image`, with `live` the brokers that are registered and unfenced
/// and `operations` a topic's authorized operations (`None`: it may not be described).
fn describe(
    image: &MetadataImage,
    live: &[LiveBroker],
    req: &DescribeTopicPartitionsRequest,
    operations: &dyn Fn(&str) -> Option<i32>,
) -> DescribeTopicPartitionsResponse {
    let cursor = req
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.as_str(), c.partition_index));
    let after_cursor = |name: &str| cursor.is_none_or(|(c, _)| name >= c);
    let all_topics = req.topics.is_empty();
    let names: BTreeSet<&str> = if all_topics {
        image
            .topics
            .keys()
            .map(String::as_str)
            .filter(|n| after_cursor(n) && operations(n).is_some())
            .collect()
    } else {
        req.topics
            .iter()
            .map(|t| t.name.0.as_str())
            .filter(|n| after_cursor(n))
            .collect()
    };
    if let Some((topic, partition)) = cursor {
        if !all_topics && !names.contains(topic) {
            return invalid_request(req);
        }
        if partition < 0 {
            return invalid_request(req);
        }
    }
    let limit = req
        .response_partition_limit
        .clamp(1, PARTITIONS_PER_RESPONSE_MAX);
    let mut remaining = usize::try_from(limit).expect("the limit is at least 1");
    let mut response = DescribeTopicPartitionsResponse::default();
    for name in names {
        if remaining == 0 {
            // Every partition of the previous topics fitted: the next page starts here.
            response.next_cursor = Some(next_cursor(name, 0));
            break;
        }
        let Some(topic_operations) = operations(name) else {
            let mut topic = DescribeTopicPartitionsResponseTopic::default();
            topic.name = Some(topic_name(name));
            topic.error_code = code(ResponseError::TopicAuthorizationFailed);
            response.topics.push(topic);
            continue;
        };
        let Some(t) = image.topics.get(name) else {
            if !all_topics {
                response
                    .topics
                    .push(unknown_topic(image, name, topic_operations));
            }
            continue;
        };
        let start = match cursor {
            Some((c, p)) if c == name => usize::try_from(p).unwrap_or(0),
            _ => 0,
        };
        let end = t.partitions.len().min(start.saturating_add(remaining));
        let mut topic = DescribeTopicPartitionsResponseTopic::default();
        topic.name = Some(topic_name(name));
        topic.topic_id = t.id;
        topic.is_internal = is_internal(image, name);
        topic.topic_authorized_operations = topic_operations;
        topic.partitions = (start..end)
            .map(|p| partition_response(p, &t.partitions[p], live))
            .collect();
        remaining -= topic.partitions.len();
        response.topics.push(topic);
        if end < t.partitions.len() {
            let next = i32::try_from(end).expect("partition counts fit i32");
            response.next_cursor = Some(next_cursor(name, next));
            break;
        }
    }
    response
}

/// A named topic the image does not have.
fn unknown_topic(
    image: &MetadataImage,
    name: &str,
    operations: i32,
) -> DescribeTopicPartitionsResponseTopic {
    let mut topic = DescribeTopicPartitionsResponseTopic::default();
    topic.name = Some(topic_name(name));
    topic.error_code = if validate_topic_name(name).is_err() {
        code(ResponseError::InvalidTopicException)
    } else {
        code(ResponseError::UnknownTopicOrPartition)
    };
    topic.is_internal = is_internal(image, name);
    topic.topic_authorized_operations = operations;
    topic
}

fn next_cursor(topic: &str, partition_index: i32) -> Cursor {
    let mut cursor = Cursor::default();
    cursor.topic_name = topic_name(topic);
    cursor.partition_index = partition_index;
    cursor
}

/// Kafka's `DescribeTopicPartitionsRequest.getErrorResponse` for `INVALID_REQUEST`.
fn invalid_request(req: &DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse {
    let mut response = DescribeTopicPartitionsResponse::default();
    for t in &req.topics {
        let mut topic = DescribeTopicPartitionsResponseTopic::default();
        topic.name = Some(t.name.clone());
        topic.error_code = code(ResponseError::InvalidRequest);
        response.topics.push(topic);
    }
    response
}

/// Partition `p` as the image has it; its offline replicas are those not in `live`.
fn partition_response(
    p: usize,
    image: &PartitionImage,
    live: &[LiveBroker],
) -> DescribeTopicPartitionsResponsePartition {
    let mut partition = DescribeTopicPartitionsResponsePartition::default();
    partition.partition_index = i32::try_from(p).expect("partition counts fit i32");
    partition.leader_id = BrokerId(image.leader);
    partition.leader_epoch = image.leader_epoch;
    partition.replica_nodes = image.replicas.iter().copied().map(BrokerId).collect();
    partition.isr_nodes = image.isr.iter().copied().map(BrokerId).collect();
    partition.eligible_leader_replicas = Some(Vec::new());
    partition.last_known_elr = Some(Vec::new());
    partition.offline_replicas = image
        .replicas
        .iter()
        .filter(|r| !live.iter().any(|b| b.id == **r))
        .copied()
        .map(BrokerId)
        .collect();
    partition
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`describe`] for a session that may describe every topic, with Kafka's operations of a
    /// broker without an authorizer.
    fn describe_all(
        image: &MetadataImage,
        live: &[LiveBroker],
        req: &DescribeTopicPartitionsRequest,
    ) -> DescribeTopicPartitionsResponse {
        describe(image, live, req, &|_| Some(3576))
    }
    use net::kafka_protocol::messages::describe_topic_partitions_request::{
        Cursor as RequestCursor, TopicRequest,
    };
    use replication::metadata::TopicImage;
    use std::collections::BTreeMap;

    /// Topics `a` (3 partitions), `b` (2) and `c` (1), each led by broker 1 alone.
    fn image() -> MetadataImage {
        let mut image = MetadataImage::new("c".to_string());
        for (name, count) in [("a", 3), ("b", 2), ("c", 1)] {
            let partitions = vec![
                PartitionImage {
                    replicas: vec![1, 2],
                    isr: vec![1],
                    leader: 1,
                    leader_epoch: 4,
                    partition_epoch: 5,
                    adding_replicas: Vec::new(),
                    removing_replicas: Vec::new(),
                };
                count
            ];
            let topic = TopicImage {
                id: uuid::Uuid::from_u128(count as u128),
                internal: false,
                partitions,
                configs: BTreeMap::new(),
            };
            image.topics.insert(name.to_string(), topic);
        }
        image
    }

    fn live() -> Vec<LiveBroker> {
        vec![LiveBroker {
            id: 1,
            host: "h".into(),
            port: 1,
            rack: None,
        }]
    }

    fn request(
        topics: &[&str],
        limit: i32,
        cursor: Option<(&str, i32)>,
    ) -> DescribeTopicPartitionsRequest {
        let mut req = DescribeTopicPartitionsRequest::default();
        req.topics = topics
            .iter()
            .map(|n| {
                let mut t = TopicRequest::default();
                t.name = topic_name(n);
                t
            })
            .collect();
        req.response_partition_limit = limit;
        req.cursor = cursor.map(|(t, p)| {
            let mut c = RequestCursor::default();
            c.topic_name = topic_name(t);
            c.partition_index = p;
            c
        });
        req
    }

    /// (topic, error, partition ids) of one topic.
    type TopicPage = (String, i16, Vec<i32>);

    /// Each topic's [`TopicPage`], and the next cursor.
    fn page(r: &DescribeTopicPartitionsResponse) -> (Vec<TopicPage>, Option<(String, i32)>) {
        let topics = r
            .topics
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
                let ids = t.partitions.iter().map(|p| p.partition_index).collect();
                (name, t.error_code, ids)
            })
            .collect();
        let cursor = r
            .next_cursor
            .as_ref()
            .map(|c| (c.topic_name.0.to_string(), c.partition_index));
        (topics, cursor)
    }

    fn t(name: &str, error: i16, ids: &[i32]) -> TopicPage {
        (name.to_string(), error, ids.to_vec())
    }

    #[test]
    fn pages_follow_the_cursor_through_every_partition() {
        let image = image();
        let r = describe_all(&image, &live(), &request(&[], 2, None));
        assert_eq!(page(&r), (vec![t("a", 0, &[0, 1])], Some(("a".into(), 2))));
        let r = describe_all(&image, &live(), &request(&[], 2, Some(("a", 2))));
        assert_eq!(
            page(&r),
            (
                vec![t("a", 0, &[2]), t("b", 0, &[0])],
                Some(("b".into(), 1))
            )
        );
        let r = describe_all(&image, &live(), &request(&[], 2, Some(("b", 1))));
        assert_eq!(page(&r), (vec![t("b", 0, &[1]), t("c", 0, &[0])], None));
        // A page that ends exactly at a topic's end points at the next topic's start.
        let r = describe_all(&image, &live(), &request(&[], 3, None));
        assert_eq!(
            page(&r),
            (vec![t("a", 0, &[0, 1, 2])], Some(("b".into(), 0)))
        );
        // The limit is at least 1 and at most PARTITIONS_PER_RESPONSE_MAX.
        let r = describe_all(&image, &live(), &request(&[], 0, None));
        assert_eq!(page(&r), (vec![t("a", 0, &[0])], Some(("a".into(), 1))));
        let r = describe_all(&image, &live(), &request(&[], i32::MAX, None));
        assert_eq!(page(&r).1, None);
        assert_eq!(r.topics.len(), 3);
    }

    #[test]
    fn named_topics_are_sorted_once_and_unknown_ones_get_errors() {
        let image = image();
        let r = describe_all(
            &image,
            &live(),
            &request(&["c", "zz", "a", "c", "bad/name"], 100, None),
        );
        assert_eq!(
            page(&r),
            (
                vec![
                    t("a", 0, &[0, 1, 2]),
                    t("bad/name", 17, &[]),
                    t("c", 0, &[0]),
                    t("zz", 3, &[]),
                ],
                None
            )
        );
        let a = &r.topics[0];
        assert_eq!(a.topic_authorized_operations, 3576);
        assert_eq!(a.topic_id, uuid::Uuid::from_u128(3));
        let p = &a.partitions[0];
        assert_eq!((p.leader_id, p.leader_epoch), (BrokerId(1), 4));
        assert_eq!(p.offline_replicas, vec![BrokerId(2)]);
        assert_eq!(p.eligible_leader_replicas, Some(Vec::new()));
    }

    #[test]
    fn a_cursor_must_name_a_requested_topic_and_a_valid_partition() {
        let image = image();
        let r = describe_all(&image, &live(), &request(&["a", "b"], 10, Some(("c", 0))));
        assert_eq!(page(&r), (vec![t("a", 42, &[]), t("b", 42, &[])], None));
        let r = describe_all(&image, &live(), &request(&["a"], 10, Some(("a", -1))));
        assert_eq!(page(&r), (vec![t("a", 42, &[])], None));
        // Without named topics the error has nowhere to go: an empty answer.
        let r = describe_all(&image, &live(), &request(&[], 10, Some(("a", -1))));
        assert_eq!(page(&r), (vec![], None));
        // Named topics before the cursor are left out.
        let r = describe_all(
            &image,
            &live(),
            &request(&["a", "b", "c"], 10, Some(("b", 1))),
        );
        assert_eq!(page(&r), (vec![t("b", 0, &[1]), t("c", 0, &[0])], None));
    }
}
