//! Cluster metadata: topics, their partitions, which shard owns each partition, and each
//! topic's config overrides. Shard 0 owns it (the Raft controller later) and persists it as
//! `<data>/cluster-metadata.json`, replaced atomically; every shard works from an immutable
//! `Arc` snapshot pushed to it on each change (DESIGN.md §2).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use tuning::config::{ConfigError, TopicConfig};
use uuid::Uuid;

/// One topic.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct TopicMeta {
    /// Topic id (KIP-516).
    pub id: Uuid,
    /// Owning shard of each partition, indexed by partition number.
    pub partition_shards: Vec<usize>,
    /// Topic config properties set explicitly (Kafka names → values); the rest are defaults.
    pub overrides: BTreeMap<String, String>,
}

impl TopicMeta {
    /// The topic's effective config: `defaults` with the overrides applied.
    pub fn config(&self, defaults: &TopicConfig) -> Result<TopicConfig, ConfigError> {
        let mut config = TopicConfig::inherit(defaults);
        for (k, v) in &self.overrides {
            config.set(k, v)?;
        }
        Ok(config)
    }
}

/// All topics. Immutable once published; a change makes a new version.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// Incremented on every change.
    pub version: u64,
    /// Cluster id reported in Metadata and DescribeCluster, fixed at first start.
    pub cluster_id: String,
    pub topics: BTreeMap<String, TopicMeta>,
    /// The next idempotent-producer id InitProducerId hands out (shard 0 allocates; kept in
    /// this file so ids stay unique across restarts).
    #[serde(default)]
    pub next_producer_id: i64,
}

const FILE_NAME: &str = "cluster-metadata.json";

impl ClusterMetadata {
    /// Loads the metadata of `data_dir`, or a fresh cluster when there is none. Partitions
    /// placed on shards that no longer exist (fewer cores than before) move to
    /// `partition % shards`. Blocking: call at start-up only.
    pub fn load(data_dir: &Path, shards: usize) -> anyhow::Result<ClusterMetadata> {
        let path = data_dir.join(FILE_NAME);
        let mut meta = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<ClusterMetadata>(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ClusterMetadata {
                version: 0,
                cluster_id: Uuid::new_v4().simple().to_string(),
                topics: BTreeMap::new(),
                next_producer_id: 0,
            },
            Err(e) => return Err(anyhow::anyhow!("{}: {e}", path.display())),
        };
        for topic in meta.topics.values_mut() {
            for (p, shard) in topic.partition_shards.iter_mut().enumerate() {
                if *shard >= shards {
                    *shard = p % shards;
                }
            }
        }
        Ok(meta)
    }

    /// Writes the metadata durably: temp file, fsync, rename, directory fsync. Blocking: the
    /// controller runs it on the executor's blocking pool.
    pub fn save_blocking(&self, data_dir: &Path) -> std::io::Result<()> {
        let path = data_dir.join(FILE_NAME);
        let tmp = data_dir.join(format!("{FILE_NAME}.tmp"));
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(data_dir)?.sync_all()
    }

    /// Partitions owned by each shard, counted (placement puts new partitions on the least
    /// loaded shard).
    pub fn partitions_per_shard(&self, shards: usize) -> Vec<usize> {
        let mut counts = vec![0; shards];
        for t in self.topics.values() {
            for &s in &t.partition_shards {
                if s < shards {
                    counts[s] += 1;
                }
            }
        }
        counts
    }

    /// Owning shard of `topic`/`partition`, if it exists.
    pub fn owner(&self, topic: &str, partition: i32) -> Option<usize> {
        let t = self.topics.get(topic)?;
        t.partition_shards
            .get(usize::try_from(partition).ok()?)
            .copied()
    }
}

/// Places `count` new partitions, each on the currently least-loaded shard.
pub fn place_partitions(meta: &ClusterMetadata, shards: usize, count: usize) -> Vec<usize> {
    let mut load = meta.partitions_per_shard(shards);
    (0..count)
        .map(|_| {
            let (shard, _) = load
                .iter()
                .enumerate()
                .min_by_key(|(i, l)| (**l, *i))
                .expect("at least one shard");
            load[shard] += 1;
            shard
        })
        .collect()
}

/// Kafka's topic name rules: 1–249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("topic name cannot be '{name}'"));
    }
    if name.len() > 249 {
        return Err(format!(
            "topic name is {} characters, the maximum is 249",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "topic name '{name}' contains '{c}'; legal characters are ASCII letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_a-b").is_ok());
        for bad in ["", ".", "..", "a b", "ü", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn placement_fills_the_least_loaded_shard() {
        let meta = ClusterMetadata::default();
        assert_eq!(place_partitions(&meta, 3, 5), vec![0, 1, 2, 0, 1]);
    }
}
