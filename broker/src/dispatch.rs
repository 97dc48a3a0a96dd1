//! The shard mesh's receiving end: each message another shard sends this one ([`ShardMsg`]) is
//! handed to the service that owns its kind — the partition service (`partitions::service::run_here`), the
//! controller, the group service, metadata installation, metrics snapshots, client-quota
//! reports.

use crate::messages::ShardMsg;
use crate::partitions::PartitionOp;
use crate::rt::TaskQueueHandle;
use crate::shard::{Shard, TaskQueues};
use std::rc::Rc;

/// The task queue a message from another shard runs in: produce and fetch work in theirs,
/// the rest in the executor's default queue.
pub fn queue_for(queues: &TaskQueues, msg: &ShardMsg) -> Option<TaskQueueHandle> {
    match msg {
        ShardMsg::Partition {
            op: PartitionOp::Produce { .. },
            ..
        } => Some(queues.produce),
        ShardMsg::Partition {
            op: PartitionOp::Fetch { .. },
            ..
        } => Some(queues.fetch),
        _ => None,
    }
}

/// Handles one message from another shard.
pub async fn handle_message(shard: &Rc<Shard>, msg: ShardMsg) {
    match msg {
        ShardMsg::Partition { tp, op, reply } => {
            let _ = reply.send(crate::partitions::service::run_here(shard, &tp, op).await);
        }
        ShardMsg::Controller {
            request,
            forwarded,
            reply,
        } => {
            let _ = reply.send(crate::controller::route(shard, request, forwarded).await);
        }
        ShardMsg::Metadata { snapshot, reply } => {
            crate::partition_lifecycle::apply_metadata(shard, snapshot).await;
            let _ = reply.send(());
        }
        ShardMsg::AllocateProducerId { reply } => {
            let _ = reply.send(crate::controller::allocate_producer_id_here(shard).await);
        }
        ShardMsg::Group {
            partition,
            group_id,
            op,
            reply,
        } => {
            let _ =
                reply.send(crate::groups::service::run_op(shard, partition, &group_id, op).await);
        }
        ShardMsg::Txn {
            partition,
            transactional_id,
            op,
            reply,
        } => {
            let _ = reply
                .send(crate::txn::service::run_op(shard, partition, &transactional_id, op).await);
        }
        ShardMsg::ListTxns { filter, reply } => {
            let _ = reply.send(crate::txn::service::list_local(shard, &filter));
        }
        ShardMsg::TxnMarker {
            partition,
            producer_id,
            end,
            reply,
        } => {
            let _ = reply.send(crate::groups::service::complete_transaction_here(
                shard,
                partition,
                producer_id,
                end,
            ));
        }
        ShardMsg::ListGroups { reply } => {
            let _ = reply.send(crate::groups::service::list_local(shard));
        }
        ShardMsg::Snapshot { reply } => {
            let _ = reply.send(shard.snapshot());
        }
        ShardMsg::QuotaReport { report } => shard.quota_meters.apply_report(&report),
    }
}
