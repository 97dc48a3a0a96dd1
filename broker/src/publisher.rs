//! Installs the image the quorum's state machine applied on every shard of this broker (the
//! KRaft broker's metadata publisher), coalescing: after each change it publishes the latest
//! image once, then marks its index as published for the proposers waiting on it.
//!
//! Gate: nothing is published before the state machine has replayed the entries the data
//! directory held at start (`initial`) and the log names its cluster — until then the shards
//! keep the image they started from (with a converted single-node store, the log is still
//! empty and publishing its empty image would close every partition).

use crate::controller::state::Controller;
use crate::metadata::ClusterMetadata;
use crate::shard::Shard;
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
        shard.publish_metadata(Arc::new(metadata)).await;
        // Every shard has set its partitions' roles: the fetchers follow the new image.
        if shard.id == crate::replica_fetcher::FETCHER_SHARD {
            crate::replica_fetcher::fetcher::reconcile(shard);
        }
        *installed = Some(Installed { image, leader });
    }
    controller.mark_published(applied);
}

/// What the shards have installed last.
struct Installed {
    image: Arc<MetadataImage>,
    leader: Option<i32>,
}
