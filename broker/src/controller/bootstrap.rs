//! What a broker starts from, and how a new metadata log begins.
//!
//! [`recover`] (blocking, before the shards start) reads the controller quorum's log in
//! `<data>/__cluster_metadata-0/` and computes the image its committed entries hold: the
//! shards open their partitions from it, and the publisher waits until the state machine has
//! replayed as far. A data directory without that log starts a new one: its first entry
//! (proposed by [`run`] once this node is the active controller, if no other voter's entry
//! came first) names the cluster and, for a data directory of a single-node broker from
//! before the quorum (`cluster-metadata.log`/`.snapshot`, or the older
//! `cluster-metadata.json`), carries its whole image over; those files are renamed
//! `*.converted` once that entry has committed, and never read again.

use super::active::{append, controller};
use crate::metadata;
use crate::shard::Shard;
use replication::metadata::{
    encode_entry, recover_image, ClusterIdRecord, MetadataImage, MetadataRecord,
};
use replication::raft::{replay, sole_voter, RaftIndex, LOG_FILE};
use replication::runtime::NodeId;
use std::path::PathBuf;
use std::rc::Rc;
use tuning::config::BrokerConfig;
use uuid::Uuid;

/// How long [`run`] waits between looks at whether this node leads (it also wakes at every
/// change of the metadata view).
const BOOTSTRAP_RECHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// What the data directory held at start.
pub struct Startup {
    /// The image the shards start from.
    pub image: MetadataImage,
    /// Index of the last committed entry of the quorum log (0: a new log).
    pub initial_applied: RaftIndex,
    /// The first entry's records when the log is new: the cluster id, then the image of an
    /// older single-node store (empty without one).
    bootstrap: Option<Vec<MetadataRecord>>,
    /// Files of the older store to rename once the first entry committed.
    converted: Vec<PathBuf>,
}

/// Reads what `config`'s data directory holds (see the module docs). Blocking: call at start-up only.
/// Errors: unreadable or corrupt metadata files.
pub fn recover(config: &BrokerConfig) -> anyhow::Result<Startup> {
    let (data_dir, node_id) = (config.data_dir.as_path(), config.node_id);
    let log = data_dir
        .join(crate::quorum::dir::QUORUM_DIR_NAME)
        .join(LOG_FILE);
    match std::fs::read(&log) {
        Ok(bytes) if !bytes.is_empty() => {
            let (recovered, _) = replay(&bytes.into())
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", log.display()))?;
            // From the stored configuration, not `controller.quorum.voters`: a voter change
            // may have added voters since (or this node joined a running quorum).
            let sole_voter = sole_voter(&recovered, NodeId(node_id));
            let (image, applied) = recover_image(&recovered, sole_voter)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", log.display()))?;
            if !image.cluster_id.is_empty() {
                return Ok(Startup {
                    image,
                    initial_applied: applied,
                    bootstrap: None,
                    converted: Vec::new(),
                });
            }
            // The log exists but its first entry never committed: start as a new log.
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(anyhow::anyhow!("reading {}: {e}", log.display())),
    }
    let (image, converted) = match metadata::read_single_node_store(data_dir, node_id)? {
        Some((image, files)) => (image, files),
        None => (
            MetadataImage::new(Uuid::new_v4().simple().to_string()),
            Vec::new(),
        ),
    };
    let mut records = vec![MetadataRecord::ClusterId(ClusterIdRecord {
        cluster_id: image.cluster_id.clone(),
    })];
    records.extend(image.to_records());
    Ok(Startup {
        image,
        initial_applied: RaftIndex(0),
        bootstrap: Some(records),
        converted,
    })
}

/// Writes `cluster_id` into the data directory's `meta.properties` (on the blocking pool),
/// once this node knows it: a new log named the cluster, or a joining controller learned it
/// (`super::joining`). A failure is logged: the broker runs on, only Kafka's tools that read
/// the file fail.
pub(super) async fn write_cluster_id(shard: &Shard, cluster_id: String) {
    let (dir, node) = (shard.config.data_dir.clone(), shard.config.node_id);
    let written = crate::rt::spawn_blocking(move || {
        crate::meta_properties::ensure(&dir, node, Some(&cluster_id))
    })
    .await;
    if let Err(e) = written {
        tracing::error!(error = %e, "writing meta.properties");
    }
}

/// On shard 0 after the voter started: proposes the first entry of a new log when this node
/// is the active controller and no voter's first entry has committed yet, then renames the
/// converted files. Runs until the log names the cluster, or the shard stops.
pub(crate) async fn run(shard: &Rc<Shard>, startup: Startup) {
    let Some(records) = startup.bootstrap else {
        return;
    };
    let Ok(controller) = controller(shard) else {
        return;
    };
    let node = NodeId(shard.config.node_id);
    loop {
        let changed = controller.view.borrow().changed();
        let notified = changed.notified();
        let image = controller.view.borrow().image();
        if !image.cluster_id.is_empty() {
            break;
        }
        if controller.is_active(node) {
            if let Ok(_permit) = controller.lock().await {
                if controller.view.borrow().image().cluster_id.is_empty() {
                    match encode_entry(&records) {
                        Ok(entry) => {
                            if let Err(e) = append(shard, controller, entry).await {
                                tracing::warn!(error = %e, "proposing the first metadata entry; retrying");
                            }
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "the first metadata entry does not encode");
                            return;
                        }
                    }
                }
            }
            continue;
        }
        let stopped = futures_lite::future::or(
            async {
                notified.await;
                false
            },
            async { shard.sleep_unless_stopped(BOOTSTRAP_RECHECK).await },
        )
        .await;
        if stopped {
            return;
        }
    }
    let named = controller.view.borrow().image().cluster_id.clone();
    write_cluster_id(shard, named.clone()).await;
    let own = startup.image.cluster_id;
    if named == own && !startup.converted.is_empty() {
        let files = startup.converted;
        crate::rt::spawn_blocking(move || {
                for file in &files {
                    let mut to = file.clone().into_os_string();
                    to.push(".converted");
                    if let Err(e) = std::fs::rename(file, &to) {
                        tracing::warn!(file = %file.display(), error = %e, "renaming a converted metadata file");
                    }
                }
            })
            .await;
        tracing::info!("converted the single-node metadata store into the quorum's log");
    } else if !startup.converted.is_empty() {
        tracing::warn!(cluster = %named, own = %own, "another voter named the cluster first; this node's older metadata store was not carried over");
    }
}
