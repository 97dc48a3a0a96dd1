//! ListPartitionReassignments (key 46), v0 (KIP-455): a single broker never reassigns
//! replicas (AlterPartitionReassignments is not served), so no reassignment is ever in
//! progress and the answer lists none — what Kafka answers when nothing is moving, for all
//! partitions or for named ones (Kafka omits named partitions that are not being reassigned).

use net::kafka_protocol::messages::ListPartitionReassignmentsResponse;

pub fn handle() -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default()
}
