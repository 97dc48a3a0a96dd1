//! Installs the image the quorum's state machine applied on every shard of this broker (the
//! KRaft broker's metadata publisher), coalescing: after each change it publishes the latest
//! image once, then marks its index as published for the proposers waiting on it. Each shard
//! installs it through the partition lifecycle (`crate::partition_lifecycle::apply_metadata`:
//! the partitions take their roles, then the group coordinator is told), this one directly and
//! the others on a `ShardMsg::Metadata`; then the replica fetchers follow the new image.
//!
//! Gate: nothing is published before the state machine has replayed the entries the data
//! directory held at start (`initial`) and the log names its cluster — until then the shards
//! keep the image they started from (with a converted single-node store, the log is still
//! empty and publishing its empty image would close every partition).

use crate::controller::state::Controller;
use crate::messages::ShardMsg;
use crate::metadata::ClusterMetadata;
use crate::shard::Shard;
use futures_channel::oneshot;
use replication::metadata::MetadataImage;
use replication::raft::RaftIndex;
use std::rc::Rc;
use std::sync::Arc;

/// Runs until the shard stops.
pub(crate) async fn run(shard: &Rc<Shard>, initial: RaftIndex) {
    let Some(controller) = shard.controller.get() else {
        return;
    };
    let mut installed: Option<Installed> = None;
    loop {
        let changed = controller.view().borrow().changed();
        let notified = changed.notified();
        publish_latest(shard, controller, initial, &mut installed).await;
        let stopped = futures_lite::future::or(
            async {
                notified.await;
                false
            },
            async {
                shard.stop.requested().await;
                true
            },
        )
        .await;
        if stopped {
            return;
        }
    }
}

async fn publish_latest(
    shard: &Rc<Shard>,
    controller: &Controller,
    initial: RaftIndex,
    installed: &mut Option<Installed>,
) {
    let (image, applied, leader) = {
        let view = controller.view().borrow();
        (view.image(), view.applied_index(), view.leader().0)
    };
    let leader = leader.map(|n| n.0);
    if applied < initial || image.cluster_id.is_empty() {
        return;
    }
    let current = installed
        .as_ref()
        .is_some_and(|i| Arc::ptr_eq(&i.image, &image) && i.leader == leader);
    if !current {
        let mut metadata =
            ClusterMetadata::new((*image).clone(), shard.shards, shard.config.node_id);
        metadata.active_controller = leader;
        metadata.metadata_offset = applied.0;
        publish(shard, Arc::new(metadata)).await;
        // Every shard has set its partitions' roles: the fetchers follow the new image.
        if shard.id == crate::replica_fetcher::FETCHER_SHARD {
            crate::replica_fetcher::fetcher::reconcile(shard);
        }
        *installed = Some(Installed { image, leader });
    }
    controller.mark_published(applied);
}

/// Sends `snapshot` to every other shard and installs it here; returns when all have it.
async fn publish(shard: &Rc<Shard>, snapshot: Arc<ClusterMetadata>) {
    let mut acks = Vec::new();
    for peer in 0..shard.shards {
        if peer == shard.id {
            continue;
        }
        let (reply, ack) = oneshot::channel();
        let msg = ShardMsg::Metadata {
            snapshot: snapshot.clone(),
            reply,
        };
        if shard.send(peer, msg).await.is_ok() {
            acks.push(ack);
        }
    }
    crate::partition_lifecycle::apply_metadata(shard, snapshot).await;
    for ack in acks {
        let _ = ack.await;
    }
}

/// What the shards have installed last.
struct Installed {
    image: Arc<MetadataImage>,
    leader: Option<i32>,
}
