//! Fetch from the closest replica (KIP-392), the leader's side: which replicas a consumer's
//! Fetch could be pointed to, by Kafka's `RackAwareReplicaSelector` as
//! `ReplicaManager.findPreferredReadReplica` applies it. Pure: it reads the request's one
//! metadata snapshot; the partition's leader then picks among them
//! (`replication::Partition::preferred_read_replica`: in its ISR, holding the fetch offset,
//! the most caught-up).
//!
//! Only a leader points a consumer elsewhere, and only for a Fetch v11+ naming a `rack_id`
//! when `replica.selector.class` is set. The candidates are the partition's other replicas
//! whose broker is registered, unfenced (Kafka's metadata cache has an endpoint for it) and in
//! the client's rack; none when the leader itself is in that rack (the selector picks the
//! leader, and Kafka sends no preferred replica then).

use crate::metadata::ClusterMetadata;
use replication::metadata::TopicImage;
use replication::runtime::NodeId;

/// The replicas of partition `partition` of `topic` that this broker, its leader, may point a
/// consumer in rack `client_rack` to, by id; empty when this broker does not lead it, is
/// itself in `client_rack`, or no live replica is (the module docs).
pub fn read_replica_candidates(
    meta: &ClusterMetadata,
    topic: &TopicImage,
    partition: i32,
    client_rack: &str,
) -> Vec<NodeId> {
    let leads = meta.placement(topic, partition).is_some_and(|p| p.leads);
    let Some(p) = usize::try_from(partition)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .filter(|_| leads)
    else {
        return Vec::new();
    };
    let in_rack = |id: &i32| {
        meta.image
            .brokers
            .get(id)
            .is_some_and(|b| !b.fenced && b.rack.as_deref() == Some(client_rack))
    };
    if in_rack(&p.leader) {
        return Vec::new();
    }
    p.replicas
        .iter()
        .filter(|id| **id != p.leader && in_rack(id))
        .map(|&id| NodeId(id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use replication::metadata::{BrokerRegistration, MetadataImage, PartitionImage};

    /// Brokers 1 (rack a), 2 (rack b), 3 (rack b), 4 (rack c, fenced); topic "t" partition 0
    /// on 1–4 led by 1; as broker `node` sees it.
    fn metadata(node: i32) -> (ClusterMetadata, TopicImage) {
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
                isr: vec![1, 2, 3, 4],
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
    fn the_leader_may_point_to_the_live_replicas_of_the_clients_rack() {
        let (meta, topic) = metadata(1);
        assert_eq!(
            read_replica_candidates(&meta, &topic, 0, "b"),
            vec![NodeId(2), NodeId(3)]
        );
    }

    #[test]
    fn none_for_the_leaders_rack_an_empty_or_fenced_rack_or_at_a_follower() {
        let (meta, topic) = metadata(1);
        for (rack, why) in [
            ("a", "the leader's rack"),
            ("c", "4 is fenced"),
            ("d", "no replica there"),
        ] {
            assert!(
                read_replica_candidates(&meta, &topic, 0, rack).is_empty(),
                "{why}"
            );
        }
        assert!(
            read_replica_candidates(&meta, &topic, 1, "b").is_empty(),
            "no such partition"
        );
        let (meta, topic) = metadata(2);
        assert!(
            read_replica_candidates(&meta, &topic, 0, "b").is_empty(),
            "2 does not lead"
        );
    }
}
