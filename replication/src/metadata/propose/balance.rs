//! Leader balance (`auto.leader.rebalance.enable`): which partitions the active controller
//! moves back to their preferred replica, the first of the assignment.
//!
//! Per broker, as Kafka's `KafkaController.checkAndTriggerAutoLeaderRebalance` (the
//! documented meaning of `leader.imbalance.per.broker.percentage`): of the partitions whose
//! preferred replica it is, the share it does not lead is its imbalance; above the threshold,
//! each of those partitions whose preferred replica can lead (in the ISR, registered,
//! unfenced, not shutting down) gets a preferred election. At most
//! [`ELECTIONS_PER_BALANCE_MAX`] per pass (KRaft's `MAX_ELECTIONS_PER_IMBALANCE`); the
//! controller runs the next pass at once when a pass was full.
//!
//! KRaft's `QuorumController` elects every such partition whatever the ratio (it reads no
//! percentage); with the default 10 % the two differ only for a broker that leads more than
//! nine in ten of its preferred partitions.

use crate::metadata::image::MetadataImage;
use std::collections::BTreeMap;

/// The most preferred elections one balance pass asks for (Kafka's
/// `ReplicationControlManager.MAX_ELECTIONS_PER_IMBALANCE`).
pub const ELECTIONS_PER_BALANCE_MAX: usize = 1_000;

/// The partitions of `image` to move back to their preferred replica, by topic in name order
/// (the shape of [`crate::metadata::ControllerOp::ElectLeaders`]), at most `elections_max` of
/// them: those of every broker whose imbalance exceeds `imbalance_percentage` percent and whose
/// preferred replica can lead. Empty when the leaders are balanced.
pub fn partitions_to_balance(
    image: &MetadataImage,
    imbalance_percentage: i32,
    elections_max: usize,
) -> Vec<(String, Vec<i32>)> {
    let imbalanced = imbalanced_brokers(image, imbalance_percentage);
    let can_lead = |broker: i32, isr: &[i32]| {
        isr.contains(&broker) && image.brokers.get(&broker).is_some_and(|b| b.is_active())
    };
    let mut out: Vec<(String, Vec<i32>)> = Vec::new();
    let mut count = 0;
    for (topic, t) in &image.topics {
        let mut ids = Vec::new();
        for (p, partition) in t.partitions.iter().enumerate() {
            if count == elections_max {
                break;
            }
            let Some(&preferred) = partition.replicas.first() else {
                continue;
            };
            if partition.leader == preferred
                || !imbalanced.contains(&preferred)
                || !can_lead(preferred, &partition.isr)
            {
                continue;
            }
            let Ok(id) = i32::try_from(p) else {
                continue;
            };
            ids.push(id);
            count += 1;
        }
        if !ids.is_empty() {
            out.push((topic.clone(), ids));
        }
    }
    assert!(count <= elections_max, "a pass is bounded");
    out
}

/// The brokers whose share of preferred partitions they do not lead is above
/// `imbalance_percentage` percent.
fn imbalanced_brokers(image: &MetadataImage, imbalance_percentage: i32) -> Vec<i32> {
    // Preferred replica → (its partitions, those it does not lead).
    let mut counts: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    for t in image.topics.values() {
        for partition in &t.partitions {
            let Some(&preferred) = partition.replicas.first() else {
                continue;
            };
            let entry = counts.entry(preferred).or_default();
            entry.0 += 1;
            if partition.leader != preferred {
                entry.1 += 1;
            }
        }
    }
    counts
        .into_iter()
        .filter(|&(_, (total, not_led))| {
            assert!(not_led <= total, "a broker leads no more than it prefers");
            // not_led / total > percentage / 100, in integers.
            not_led * 100 > i64::from(imbalance_percentage) * total
        })
        .map(|(broker, _)| broker)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::image::{BrokerRegistration, PartitionImage, TopicImage};
    use uuid::Uuid;

    fn broker(fenced: bool) -> BrokerRegistration {
        BrokerRegistration {
            incarnation_id: Uuid::nil(),
            broker_epoch: 1,
            end_points: Vec::new(),
            rack: None,
            fenced,
            in_controlled_shutdown: false,
        }
    }

    /// Brokers 1–3 active; topic `t` with the given (replicas, isr, leader) partitions.
    fn image(partitions: &[(&[i32], &[i32], i32)]) -> MetadataImage {
        let mut image = MetadataImage::new("c".to_string());
        for id in 1..=3 {
            image.brokers.insert(id, broker(false));
        }
        let partitions = partitions
            .iter()
            .map(|(replicas, isr, leader)| PartitionImage {
                replicas: replicas.to_vec(),
                isr: isr.to_vec(),
                leader: *leader,
                leader_epoch: 0,
                partition_epoch: 0,
                adding_replicas: Vec::new(),
                removing_replicas: Vec::new(),
            })
            .collect();
        let topic = TopicImage {
            id: Uuid::nil(),
            internal: false,
            partitions,
            configs: BTreeMap::new(),
        };
        image.topics.insert("t".to_string(), topic);
        image
    }

    #[test]
    fn a_broker_that_lost_its_leaderships_gets_them_back() {
        let image = image(&[
            (&[1, 2, 3], &[1, 2, 3], 2),
            (&[2, 3, 1], &[1, 2, 3], 2),
            (&[3, 1, 2], &[1, 2, 3], 3),
            (&[1, 2, 3], &[1, 2, 3], 3),
        ]);
        assert_eq!(
            partitions_to_balance(&image, 10, ELECTIONS_PER_BALANCE_MAX),
            [("t".to_string(), vec![0, 3])]
        );
    }

    #[test]
    fn balanced_leaders_need_nothing() {
        let image = image(&[(&[1, 2, 3], &[1, 2, 3], 1), (&[2, 3, 1], &[2, 3, 1], 2)]);
        assert!(partitions_to_balance(&image, 10, ELECTIONS_PER_BALANCE_MAX).is_empty());
        assert!(partitions_to_balance(&image, 0, ELECTIONS_PER_BALANCE_MAX).is_empty());
    }

    #[test]
    fn the_preferred_replica_must_be_in_the_isr_and_active() {
        // Out of the ISR (still catching up after a restart): not moved.
        let mut out_of_isr = image(&[(&[1, 2, 3], &[2, 3], 2)]);
        assert!(partitions_to_balance(&out_of_isr, 10, ELECTIONS_PER_BALANCE_MAX).is_empty());
        // In the ISR but fenced, or shutting down: not moved.
        out_of_isr.topics.get_mut("t").expect("t").partitions[0].isr = vec![1, 2, 3];
        out_of_isr.brokers.insert(1, broker(true));
        assert!(partitions_to_balance(&out_of_isr, 10, ELECTIONS_PER_BALANCE_MAX).is_empty());
        let mut shutting_down = broker(false);
        shutting_down.in_controlled_shutdown = true;
        out_of_isr.brokers.insert(1, shutting_down);
        assert!(partitions_to_balance(&out_of_isr, 10, ELECTIONS_PER_BALANCE_MAX).is_empty());
        // Unregistered: not moved.
        out_of_isr.brokers.remove(&1);
        assert!(partitions_to_balance(&out_of_isr, 10, ELECTIONS_PER_BALANCE_MAX).is_empty());
    }

    #[test]
    fn an_imbalance_at_or_below_the_threshold_is_left_alone() {
        // Broker 1 prefers 10 partitions and leads 9 of them: 10 %, not above 10 %.
        let mut partitions: Vec<(&[i32], &[i32], i32)> = vec![(&[1, 2], &[1, 2], 1); 9];
        partitions.push((&[1, 2], &[1, 2], 2));
        let image = image(&partitions);
        assert!(partitions_to_balance(&image, 10, ELECTIONS_PER_BALANCE_MAX).is_empty());
        assert_eq!(
            partitions_to_balance(&image, 9, ELECTIONS_PER_BALANCE_MAX),
            [("t".to_string(), vec![9])]
        );
        // A negative percentage, as Kafka accepts: any imbalance.
        assert_eq!(
            partitions_to_balance(&image, -5, ELECTIONS_PER_BALANCE_MAX),
            [("t".to_string(), vec![9])]
        );
    }

    #[test]
    fn a_pass_is_bounded() {
        let image = image(&[(&[1, 2][..], &[1, 2][..], 2); 5]);
        assert_eq!(
            partitions_to_balance(&image, 10, 3),
            [("t".to_string(), vec![0, 1, 2])]
        );
        assert!(partitions_to_balance(&image, 10, 0).is_empty());
    }
}
