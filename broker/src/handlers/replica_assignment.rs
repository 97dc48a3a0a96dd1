//! Manual replica assignments of CreateTopics and CreatePartitions, checked as Kafka's KRaft
//! controller checks them (`ReplicationControlManager.validateManualPartitionAssignment`):
//! every replica list is non-empty, names no broker twice, names only registered brokers
//! (here: this node, `node.id`), and has the same length as the others. Errors are Kafka's
//! `INVALID_REPLICA_ASSIGNMENT` with its messages.

use crate::errors::code;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::BrokerId;

/// A refusal: Kafka's error code and message.
pub type Refusal = (i16, String);

fn invalid(message: String) -> Refusal {
    (code(ResponseError::InvalidReplicaAssignment), message)
}

/// Checks the replica lists of one topic's new partitions against the live brokers
/// (`brokers`); returns the replication factor they give. `previous_replicas` is the
/// replication factor of the topic's existing partitions (CreatePartitions), which every new
/// list must match.
pub fn check(
    lists: &[&[BrokerId]],
    brokers: &[i32],
    previous_replicas: Option<usize>,
) -> Result<i16, Refusal> {
    let mut replicas = previous_replicas;
    for list in lists {
        if list.is_empty() {
            return Err(invalid(
                "The manual partition assignment includes an empty replica list.".to_string(),
            ));
        }
        for (i, broker) in list.iter().enumerate() {
            if list[..i].contains(broker) {
                return Err(invalid(format!(
                    "The manual partition assignment includes the broker {} more than once.",
                    broker.0
                )));
            }
            if !brokers.contains(&broker.0) {
                return Err(invalid(format!(
                    "The manual partition assignment includes broker {}, but no such broker is registered.",
                    broker.0
                )));
            }
        }
        match replicas {
            Some(n) if n != list.len() => {
                return Err(invalid(format!(
                    "The manual partition assignment includes a partition with {} replica(s), \
                     but this is not consistent with previous partitions, which have {n} \
                     replica(s).",
                    list.len()
                )))
            }
            _ => replicas = Some(list.len()),
        }
    }
    let replicas = replicas.unwrap_or(1);
    i16::try_from(replicas).map_err(|_| invalid(format!("{replicas} replicas is too many")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[i32]) -> Vec<BrokerId> {
        v.iter().map(|&i| BrokerId(i)).collect()
    }

    #[test]
    fn lists_of_this_node_are_accepted_and_give_the_replication_factor() {
        let a = ids(&[0]);
        assert_eq!(check(&[&a, &a], &[0], None), Ok(1));
        assert_eq!(check(&[&a], &[0], Some(1)), Ok(1));
    }

    #[test]
    fn empty_duplicate_unknown_and_uneven_lists_are_refused() {
        let refused =
            |lists: &[&[BrokerId]], previous| check(lists, &[0, 1], previous).map_err(|(c, _)| c);
        let want = Err(code(ResponseError::InvalidReplicaAssignment));
        assert_eq!(refused(&[&ids(&[])], None), want);
        assert_eq!(refused(&[&ids(&[0, 0])], None), want);
        assert_eq!(refused(&[&ids(&[7])], None), want);
        assert_eq!(refused(&[&ids(&[0]), &ids(&[0, 1])], None), want);
        assert_eq!(refused(&[&ids(&[0, 1])], Some(1)), want);
    }
}
