//! Fetch from the closest replica (KIP-392), the leader's side: which replica a consumer
//! should read a partition from, Kafka's `RackAwareReplicaSelector` as
//! `ReplicaManager.findPreferredReadReplica` applies it. Pure: it reads the request's one
//! metadata snapshot.
//!
//! Only a leader answers with a preferred read replica, and only to a consumer's Fetch v11+
//! naming a `rack_id` when `replica.selector.class` is set. The candidates are the partition's
//! in-sync replicas whose broker is registered, unfenced and in the client's rack; the leader
//! itself when it is in that rack, and then none is answered (the consumer stays), nor when no
//! replica is in that rack. One difference from Kafka: Kafka picks among several candidates in
//! the rack the most caught-up one (log end offset, then time since caught up) and skips a
//! replica whose log does not hold the fetch offset; here the candidate with the lowest broker
//! id is picked from the image's ISR, and a consumer that asks such a follower for an offset it
//! does not have gets OFFSET_OUT_OF_RANGE, on which Kafka's clients go back to the leader.

use crate::metadata::ClusterMetadata;
use replication::metadata::TopicImage;

/// The broker a consumer in rack `client_rack` should read partition `partition` of `topic`
/// from instead of this broker, which leads it; `None` when this broker does not lead it, is
/// itself in `client_rack`, or no live in-sync replica is (the module docs).
pub fn preferred_read_replica(
    meta: &ClusterMetadata,
    topic: &TopicImage,
    partition: i32,
    client_rack: &str,
) -> Option<i32> {
    if !meta.placement(topic, partition)?.leads {
        return None;
    }
    let p = topic.partitions.get(usize::try_from(partition).ok()?)?;
    let in_rack = |id: &i32| {
        meta.image
            .brokers
            .get(id)
            .is_some_and(|b| !b.fenced && b.rack.as_deref() == Some(client_rack))
    };
    if in_rack(&p.leader) {
        return None;
    }
    p.isr
        .iter()
        .filter(|id| **id != p.leader && in_rack(id))
        .min()
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use replication::metadata::{BrokerRegistration, MetadataImage, PartitionImage};

    /// Brokers 1 (rack a), 2 (rack b), 3 (rack b), 4 (rack c, fenced); topic "t" partition 0
    /// on 1–4 led by 1, ISR `isr`; as broker `node` sees it.
    fn metadata(node: i32, isr: Vec<i32>) -> (ClusterMetadata, TopicImage) {
        let mut image = MetadataImage::default();
        for (id, rack, fenced) in [
            (1, "a", false),
            (2, "b", false),
            (3, "b", false),
            (4, "c", true),
        ] {
            image.brokers.insert(
                id,
                BrokerRegistration {
                    incarnation_id: uuid::Uuid::from_u128(id as u128),
                    broker_epoch: 1,
                    end_points: Vec::new(),
                    rack: Some(rack.to_string()),
                    fenced,
                    in_controlled_shutdown: false,
                },
            );
        }
        let topic = TopicImage {
            id: uuid::Uuid::from_u128(7),
            internal: false,
            partitions: vec![PartitionImage {
                replicas: vec![1, 2, 3, 4],
                isr,
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                adding_replicas: Vec::new(),
                removing_replicas: Vec::new(),
            }],
            configs: Default::default(),
        };
        image.topics.insert("t".to_string(), topic.clone());
        (ClusterMetadata::new(image, 1, node), topic)
    }

    #[test]
    fn the_leader_names_the_lowest_in_sync_replica_of_the_clients_rack() {
        let (meta, topic) = metadata(1, vec![1, 2, 3, 4]);
        assert_eq!(preferred_read_replica(&meta, &topic, 0, "b"), Some(2));
        let (meta, topic) = metadata(1, vec![1, 3, 4]);
        assert_eq!(
            preferred_read_replica(&meta, &topic, 0, "b"),
            Some(3),
            "2 is out of the ISR"
        );
    }

    #[test]
    fn none_for_the_leaders_rack_an_empty_or_fenced_rack_or_at_a_follower() {
        let (meta, topic) = metadata(1, vec![1, 2, 3, 4]);
        assert_eq!(
            preferred_read_replica(&meta, &topic, 0, "a"),
            None,
            "the leader's rack"
        );
        assert_eq!(
            preferred_read_replica(&meta, &topic, 0, "c"),
            None,
            "4 is fenced"
        );
        assert_eq!(
            preferred_read_replica(&meta, &topic, 0, "d"),
            None,
            "no replica there"
        );
        assert_eq!(
            preferred_read_replica(&meta, &topic, 1, "b"),
            None,
            "no such partition"
        );
        let (meta, topic) = metadata(2, vec![1, 2, 3, 4]);
        assert_eq!(
            preferred_read_replica(&meta, &topic, 0, "b"),
            None,
            "2 does not lead"
        );
    }
}
