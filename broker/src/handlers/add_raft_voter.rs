//! AddRaftVoter (key 80), v0 (KIP-853; Kafka's `KafkaRaftClient.handleAddVoterRequest`,
//! reached through `ControllerApis` on a controller and forwarded by a broker): the active
//! controller adds controller `voter_id` to the metadata quorum's voters — first as a learner
//! that receives the log, then as a voter once it holds every committed entry — and answers
//! once that committed (`kafka-metadata-quorum.sh add-controller`). The new controller runs
//! already: started with `controller.quorum.bootstrap.servers` and no voters, it waits to be
//! added. A broker that is not the active controller forwards the request.
//!
//! As Kafka: ALTER on the cluster; a `cluster_id` naming another cluster is
//! `INCONSISTENT_CLUSTER_ID`; a voter is `DUPLICATE_VOTER`; a controller that does not catch up
//! within the request's `timeout_ms`, or another change in progress, is `REQUEST_TIMED_OUT`;
//! no endpoint for this cluster's controller listener (the first of
//! `controller.listener.names`, else `CONTROLLER`) is `INVALID_REQUEST`. The wait is bounded
//! below the forwarding timeout. Sluice keeps no directory ids: `voter_directory_id` is not
//! recorded.

use super::wire::str_bytes;
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::{AddRaftVoterRequest, AddRaftVoterResponse};
use std::rc::Rc;
use std::time::Duration;

/// The listener name a controller's endpoint is taken from without `controller.listener.names`
/// (Kafka's conventional one, as DescribeQuorum lists the voters under).
const CONTROLLER_LISTENER: &str = "CONTROLLER";

/// The longest the active controller waits for the new voter to catch up: below a forwarding
/// broker's 15 s (`crate::controller::forward::FORWARD_TIMEOUT`).
const CATCH_UP_MAX: Duration = Duration::from_secs(10);

/// Adds the voter on the active controller.
pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: &AddRaftVoterRequest,
) -> AddRaftVoterResponse {
    let mut response = AddRaftVoterResponse::default();
    if let Some(error) = super::remove_raft_voter::refusal(shard, session, req.cluster_id.as_ref())
    {
        response.error_code = code(error);
        return response;
    }
    let name = shard
        .config
        .controller_listener_names
        .first()
        .map_or(CONTROLLER_LISTENER, String::as_str);
    let Some(listener) = req.listeners.iter().find(|l| l.name.as_str() == name) else {
        response.error_code = code(ResponseError::InvalidRequest);
        response.error_message = Some(str_bytes(format!(
            "controller {} has no endpoint for the controller listener {name}",
            req.voter_id
        )));
        return response;
    };
    let endpoint = format!("{}:{}", listener.host.as_str(), listener.port);
    let timeout =
        Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0)).min(CATCH_UP_MAX);
    if let Err(e) = crate::controller::add_voter(shard, req.voter_id, endpoint, timeout).await {
        let (error_code, message) = controller_error(&e);
        response.error_code = error_code;
        response.error_message = Some(str_bytes(message));
    }
    response
}
