//! DescribeLogDirs (key 35), v1–4 (KIP-113): the broker's one log directory (`log.dirs` /
//! `--data-dir`) with every partition's size on disk, gathered from the owning shards'
//! snapshots. A null topic list describes every partition; named partitions that do not exist
//! are left out, as Kafka leaves them out. The offset lag of a partition is its high
//! watermark's distance below the log end offset's, which is 0 for a leader (Kafka's
//! `max(HW - LEO, 0)`). `total_bytes`/`usable_bytes` (v4, KIP-827) are -1, Kafka's "unknown
//! volume": asking the file system would block the executor.

use super::wire::{str_bytes, topic_name};
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use net::kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// Kafka's `DescribeLogDirsResponse.UNKNOWN_VOLUME_BYTES`.
const UNKNOWN_VOLUME_BYTES: i64 = -1;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    // None: every partition; else the (topic, partition) pairs asked for.
    let wanted: Option<BTreeSet<(String, i32)>> = req.topics.map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic.0.to_string(), *p))
            })
            .collect()
    });
    // Kafka: DESCRIBE on the cluster, else no directory and CLUSTER_AUTHORIZATION_FAILED.
    if !authz::cluster(shard, session, AclOperation::Describe) {
        let mut response = DescribeLogDirsResponse::default();
        response.error_code = code(ResponseError::ClusterAuthorizationFailed);
        return response;
    }
    let mut topics: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for snapshot in shard.gather().await {
        for p in snapshot.partitions {
            if wanted
                .as_ref()
                .is_some_and(|w| !w.contains(&(p.topic.clone(), p.partition)))
            {
                continue;
            }
            let mut out = DescribeLogDirsPartition::default();
            out.partition_index = p.partition;
            out.partition_size = i64::try_from(p.size_bytes).unwrap_or(i64::MAX);
            out.offset_lag = (p.high_watermark - p.log_end_offset).max(0);
            topics.entry(p.topic).or_default().push(out);
        }
    }
    let mut dir = DescribeLogDirsResult::default();
    dir.log_dir = str_bytes(log_dir(shard));
    dir.total_bytes = UNKNOWN_VOLUME_BYTES;
    dir.usable_bytes = UNKNOWN_VOLUME_BYTES;
    dir.topics = topics
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            let mut t = DescribeLogDirsTopic::default();
            t.name = topic_name(&name);
            t.partitions = partitions;
            t
        })
        .collect();
    let mut response = DescribeLogDirsResponse::default();
    response.results.push(dir);
    response
}

/// The data directory as Kafka names a log dir: an absolute path when it can be made one
/// without touching the file system.
fn log_dir(shard: &Shard) -> String {
    let dir = &shard.config.data_dir;
    let absolute = if dir.is_absolute() {
        dir.clone()
    } else {
        std::env::current_dir().map_or_else(|_| dir.clone(), |cwd| cwd.join(dir))
    };
    absolute.display().to_string()
}
