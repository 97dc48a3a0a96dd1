//! A controller joining a running quorum (KIP-853; `BrokerConfig::joins_quorum`): before it is
//! added it knows no voter, yet must answer the leader that replicates to it once AddRaftVoter
//! made it a learner. [`learn_from_bootstrap`] asks the controllers of
//! `controller.quorum.bootstrap.servers` where the voters are (any controller answers
//! `ControllerRequest::DescribeVoters`), records it in the node's `super::voters::VoterBook`,
//! and writes the cluster id into `meta.properties` (Kafka's `add-controller` reads it there).

use super::active::controller;
use super::forward;
use crate::shard::Shard;
use replication::metadata::{ControllerReply, ControllerRequest};
use std::rc::Rc;
use std::time::Duration;

/// How long a joining controller waits for a bootstrap server's answer, and between rounds.
const LEARN_TIMEOUT: Duration = Duration::from_secs(2);

/// On a controller joining a running quorum: asks the controllers of
/// `controller.quorum.bootstrap.servers`, in turn, where the voters are, until one answers
/// with the cluster's id (or the shard stops), and records it; `meta.properties` gets the
/// cluster id (`crate::meta_properties`), which Kafka's `add-controller` needs.
pub(crate) async fn learn_from_bootstrap(shard: Rc<Shard>) {
    let Ok(controller) = controller(&shard) else {
        return;
    };
    let servers = shard.config.controller_quorum_bootstrap_servers.clone();
    let mut warned = false;
    while !shard.stop.is_requested() {
        for &addr in &servers {
            let host = addr.ip().to_string();
            let ask = forward::send(
                &controller.to_voters,
                &host,
                addr,
                &ControllerRequest::DescribeVoters,
            );
            let answer = futures_lite::future::or(async { Some(ask.await) }, async {
                crate::rt::sleep(LEARN_TIMEOUT).await;
                None
            })
            .await;
            match answer {
                Some(Ok(ControllerReply::Voters { cluster_id, voters }))
                    if !cluster_id.is_empty() =>
                {
                    controller.voters.learn(&voters);
                    tracing::info!(from = %addr, voters = ?voters, %cluster_id, "learned where the quorum's controllers are");
                    super::bootstrap::write_cluster_id(&shard, cluster_id).await;
                    return;
                }
                other => {
                    tracing::debug!(from = %addr, answer = ?other, "asking a bootstrap server where the voters are")
                }
            }
        }
        if !warned {
            warned = true;
            tracing::warn!(servers = %tuning::config::render_bootstrap_servers(&servers), "no controller of controller.quorum.bootstrap.servers answered where the voters are (check their addresses and that they run); asking again");
        }
        if shard.sleep_unless_stopped(LEARN_TIMEOUT).await {
            return;
        }
    }
}
