//! Leader balance on the active controller (`auto.leader.rebalance.enable`, Kafka's
//! `QuorumController.maybeScheduleNextBalancePartitionLeaders`): every
//! `leader.imbalance.check.interval.seconds`, the partitions whose preferred replica can lead
//! again and whose broker is imbalanced beyond `leader.imbalance.per.broker.percentage`
//! (`replication::metadata::partitions_to_balance`, the pure decision) get a preferred
//! election, committed as one ElectLeaders op under the controller lock. A full pass
//! ([`ELECTIONS_PER_BALANCE_MAX`] elections) runs the next one after
//! [`FULL_PASS_PAUSE`] instead of a whole interval, as Kafka reschedules it at once.

use super::active::commit;
use crate::shard::Shard;
use replication::metadata::{
    partitions_to_balance, ControllerOp, ElectionType, ELECTIONS_PER_BALANCE_MAX,
};
use replication::runtime::NodeId;
use std::rc::Rc;
use std::time::Duration;

/// The pause before the next pass after a full one (Kafka's 10 ms "immediately").
const FULL_PASS_PAUSE: Duration = Duration::from_millis(10);

/// On shard 0, for as long as the broker runs (nothing when `auto.leader.rebalance.enable` is
/// false): while this broker is the active controller, moves leaderships back to their
/// preferred replicas once per interval.
pub(crate) async fn balance_leaders(shard: &Rc<Shard>) {
    let Some(controller) = shard.controller.get() else {
        return;
    };
    let config = &shard.config;
    if !config.auto_leader_rebalance_enable {
        return;
    }
    let node = NodeId(config.node_id);
    let interval = Duration::from_secs(config.leader_imbalance_check_interval_seconds);
    let mut wait = interval;
    loop {
        if shard.sleep_unless_stopped(wait).await {
            return;
        }
        wait = interval;
        if !controller.is_active(node) {
            continue;
        }
        let Ok(_permit) = controller.lock().await else {
            return;
        };
        let image = controller.view.borrow().image();
        let partitions = partitions_to_balance(
            &image,
            config.leader_imbalance_per_broker_percentage,
            ELECTIONS_PER_BALANCE_MAX,
        );
        let elections: usize = partitions.iter().map(|(_, ids)| ids.len()).sum();
        if elections == 0 {
            continue;
        }
        let op = ControllerOp::ElectLeaders {
            election_type: ElectionType::Preferred,
            partitions: Some(partitions),
        };
        match commit(shard, controller, &op, config.node_id).await {
            Ok(_) => {
                tracing::info!(
                    elections,
                    "moved leaderships back to the preferred replicas"
                );
                if elections >= ELECTIONS_PER_BALANCE_MAX {
                    wait = FULL_PASS_PAUSE;
                }
            }
            Err(e) => tracing::warn!(error = %e, "leader balance"),
        }
    }
}
