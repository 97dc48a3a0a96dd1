//! KIP-320's check of a request's current leader epoch, before the request is routed to the
//! partition's owning shard ([`call_checked`]; Fetch v9+, ListOffsets v4+ and
//! OffsetForLeaderEpoch). The current leader epoch is the metadata image's, which every shard
//! holds, so the check needs no message; it reads the partition's placement the request
//! resolved once from its snapshot (`crate::metadata::Placement`), no lookup of its own.

use super::ops::{PartitionOp, PartitionOpError, PartitionReply};
use crate::metadata::Placement;
use crate::shard::Shard;
use replication::check_current_leader_epoch;
use std::rc::Rc;
use storage::{LeaderEpoch, TopicPartition};

/// [`super::service::call`] after KIP-320's check of the request's current leader epoch
/// (`None`: no check; see [`replication::requested_leader_epoch`] and
/// [`replication::fetch_requested_leader_epoch`] for the wire's values), the partition placed
/// from one metadata snapshot ([`call_checked_placed`]).
pub async fn call_checked(
    shard: &Rc<Shard>,
    tp: TopicPartition,
    current_leader_epoch: Option<LeaderEpoch>,
    op: PartitionOp,
) -> PartitionReply {
    let placement = shard.metadata().placement_of(&tp.topic, tp.partition);
    call_checked_placed(shard, tp, placement, current_leader_epoch, op).await
}

/// [`super::service::call_placed`] after KIP-320's check of `current_leader_epoch` against
/// `placement`'s (the partition as the request's one metadata snapshot placed it). As
/// Kafka's `Partition.getLocalLog`, the check comes first for a partition this broker hosts,
/// leader or follower: an epoch older than the partition's answers FENCED_LEADER_EPOCH, a
/// newer one UNKNOWN_LEADER_EPOCH, and only a matching epoch reaches the leader check
/// (NOT_LEADER_OR_FOLLOWER on a follower); a partition not hosted here gets the routing's
/// answer (NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION).
pub async fn call_checked_placed(
    shard: &Rc<Shard>,
    tp: TopicPartition,
    placement: Option<Placement>,
    current_leader_epoch: Option<LeaderEpoch>,
    op: PartitionOp,
) -> PartitionReply {
    if let Err(e) = check_placed(placement, current_leader_epoch) {
        return PartitionReply::Error(e);
    }
    super::service::call_placed(shard, tp, placement, op).await
}

/// [`super::service::call_hosted`] after the check [`call_checked_placed`] makes: `op` runs
/// on this broker's replica of the partition, leader or follower — a consumer's Fetch that a
/// follower serves (KIP-392). Errors: as [`call_checked_placed`], but a follower answers.
pub async fn call_checked_hosted(
    shard: &Rc<Shard>,
    tp: TopicPartition,
    placement: Option<Placement>,
    current_leader_epoch: Option<LeaderEpoch>,
    op: PartitionOp,
) -> PartitionReply {
    if let Err(e) = check_placed(placement, current_leader_epoch) {
        return PartitionReply::Error(e);
    }
    super::service::call_hosted(shard, tp, placement, op).await
}

/// The check of `current_leader_epoch` (`None`: no check) against a partition placed so
/// (`None`: no such partition; the routing answers).
pub(crate) fn check_placed(
    placement: Option<Placement>,
    current_leader_epoch: Option<LeaderEpoch>,
) -> Result<(), PartitionOpError> {
    match (current_leader_epoch, placement) {
        (Some(requested), Some(placement)) => check_hosted(placement, requested),
        _ => Ok(()),
    }
}

/// The check of `requested` against the leader epoch of a partition placed so, when this
/// broker is one of its replicas (else `Ok`: the routing answers).
fn check_hosted(placement: Placement, requested: LeaderEpoch) -> Result<(), PartitionOpError> {
    if placement.owner.is_none() {
        return Ok(());
    }
    Ok(check_current_leader_epoch(
        Some(requested),
        LeaderEpoch(placement.leader_epoch),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::ClusterMetadata;
    use replication::metadata::{MetadataImage, PartitionImage, TopicImage};
    use replication::LeaderEpochError;

    /// Topic "t" with one partition on brokers 1 and 2, led by 2 at leader epoch 3, as
    /// broker `node` sees it.
    fn metadata(node: i32) -> ClusterMetadata {
        let mut image = MetadataImage::default();
        image.topics.insert(
            "t".to_string(),
            TopicImage {
                id: uuid::Uuid::from_u128(7),
                internal: false,
                partitions: vec![PartitionImage {
                    replicas: vec![1, 2],
                    isr: vec![1, 2],
                    leader: 2,
                    leader_epoch: 3,
                    partition_epoch: 5,
                    adding_replicas: Vec::new(),
                    removing_replicas: Vec::new(),
                }],
                configs: Default::default(),
            },
        );
        ClusterMetadata::new(image, 2, node)
    }

    fn tp() -> TopicPartition {
        TopicPartition {
            topic: "t".to_string(),
            partition: 0,
        }
    }

    /// The check as a request for `tp` resolved against broker `node`'s image makes it.
    fn check_in(
        meta: &ClusterMetadata,
        tp: &TopicPartition,
        requested: i32,
    ) -> Result<(), PartitionOpError> {
        match meta.placement_of(&tp.topic, tp.partition) {
            Some(placement) => check_hosted(placement, LeaderEpoch(requested)),
            None => Ok(()),
        }
    }

    fn check(node: i32, requested: i32) -> Result<(), PartitionOpError> {
        check_in(&metadata(node), &tp(), requested)
    }

    #[test]
    fn leader_and_follower_both_check_the_images_epoch() {
        for node in [1, 2] {
            assert!(
                check(node, 3).is_ok(),
                "node {node}: the current epoch passes"
            );
            assert!(
                matches!(
                    check(node, 2),
                    Err(PartitionOpError::LeaderEpoch(
                        LeaderEpochError::Fenced { .. }
                    ))
                ),
                "node {node}: an older epoch is fenced"
            );
            assert!(
                matches!(
                    check(node, 4),
                    Err(PartitionOpError::LeaderEpoch(
                        LeaderEpochError::Unknown { .. }
                    ))
                ),
                "node {node}: a newer epoch is unknown"
            );
        }
    }

    #[test]
    fn a_partition_not_hosted_here_is_left_to_the_routing() {
        assert!(
            check(9, 0).is_ok(),
            "not a replica: NOT_LEADER_OR_FOLLOWER from `call`"
        );
        let other = TopicPartition {
            topic: "t".to_string(),
            partition: 1,
        };
        assert!(check_in(&metadata(1), &other, 0).is_ok());
    }
}
