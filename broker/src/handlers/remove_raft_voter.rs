//! RemoveRaftVoter (key 81), v0 (KIP-853; Kafka's `KafkaRaftClient.handleRemoveVoterRequest`,
//! reached through `ControllerApis` on a controller and forwarded by a broker): the active
//! controller removes controller `voter_id` from the metadata quorum's voters and answers once
//! the change committed (`kafka-metadata-quorum.sh remove-controller`). A broker that is not
//! the active controller forwards it.
//!
//! As Kafka: ALTER on the cluster; a `cluster_id` naming another cluster is
//! `INCONSISTENT_CLUSTER_ID`; a node that is not a voter, or the last voter, is
//! `VOTER_NOT_FOUND`; another change in progress is `REQUEST_TIMED_OUT`. Sluice keeps no
//! directory ids (DescribeQuorum lists the zero uuid), so `voter_directory_id` is not checked.
//! Sluice refuses (`INVALID_REQUEST`) to remove a node that is also a registered broker: a
//! removed voter no longer receives the metadata log, and a combined node does not observe it.

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::{RemoveRaftVoterRequest, RemoveRaftVoterResponse};
use net::kafka_protocol::protocol::StrBytes;
use std::rc::Rc;

/// Why a voter change (AddRaftVoter, RemoveRaftVoter) is refused before it reaches the
/// controller, as Kafka checks both: ALTER on the cluster, then `cluster_id` (when given) this
/// cluster's.
pub(super) fn refusal(
    shard: &Shard,
    session: &Session,
    cluster_id: Option<&StrBytes>,
) -> Option<ResponseError> {
    if !authz::cluster(shard, session, AclOperation::Alter) {
        return Some(ResponseError::ClusterAuthorizationFailed);
    }
    let ours = shard.metadata.borrow().cluster_id.clone();
    cluster_id
        .is_some_and(|id| id.as_str() != ours.as_str())
        .then_some(ResponseError::InconsistentClusterId)
}

/// Removes the voter on the active controller.
pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: &RemoveRaftVoterRequest,
) -> RemoveRaftVoterResponse {
    let mut response = RemoveRaftVoterResponse::default();
    if let Some(error) = refusal(shard, session, req.cluster_id.as_ref()) {
        response.error_code = code(error);
        return response;
    }
    if let Err(e) = crate::controller::remove_voter(shard, req.voter_id).await {
        let (error_code, message) = controller_error(&e);
        response.error_code = error_code;
        response.error_message = Some(str_bytes(message));
    }
    response
}
