//! This broker's view of the cluster metadata: the controller's [`MetadataImage`] (topics,
//! partitions with their cluster assignment, configs, brokers, producer-id blocks) plus the
//! node-local placement of each partition on a shard, derived from the image by the pure
//! [`shard_for`]. Shard 0 owns the image (the controller; a Raft group later) and persists it
//! as a record log + snapshot (`replication::metadata::MetadataStore`); every shard works from
//! an immutable `Arc` snapshot pushed to it on each change (DESIGN.md §2).
//!
//! Placement is not stored: partition directories are `<data>/<topic>-<partition>/`, whichever
//! shard opens them, so a broker restarted with another core count simply derives another
//! placement.

use replication::metadata::{
    BrokerEndpoint, ConfigRecord, MetadataImage, MetadataRecord, MetadataStore, PartitionRecord,
    ProducerIdsRecord, RegisterBrokerRecord, TopicImage, TopicRecord, CONFIG_RESOURCE_TOPIC,
    INTERNAL_TOPIC_NAMES,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use tuning::config::{ConfigError, TopicConfig};
use uuid::Uuid;

/// The metadata image with this broker's shard count, from which partition placement follows.
#[derive(Clone, Debug)]
pub struct ClusterMetadata {
    pub image: MetadataImage,
    shards: usize,
}

/// Read through to the image: `metadata.topics`, `metadata.cluster_id`, …
impl std::ops::Deref for ClusterMetadata {
    type Target = MetadataImage;
    fn deref(&self) -> &MetadataImage {
        &self.image
    }
}

impl ClusterMetadata {
    /// `image` as seen by a broker of `shards` shards (at least one).
    pub fn new(image: MetadataImage, shards: usize) -> ClusterMetadata {
        assert!(shards > 0, "a broker has at least one shard");
        ClusterMetadata { image, shards }
    }

    /// Owning shard of `topic`/`partition`, if it exists.
    pub fn owner(&self, topic: &str, partition: i32) -> Option<usize> {
        let t = self.image.topics.get(topic)?;
        let p = usize::try_from(partition).ok()?;
        (p < t.partitions.len()).then(|| shard_for(t.id, p, self.shards))
    }

    /// The partitions of `topic` this broker's shard `shard` owns.
    pub fn owned_partitions<'a>(
        &self,
        topic: &'a TopicImage,
        shard: usize,
    ) -> impl Iterator<Item = i32> + 'a {
        let shards = self.shards;
        (0..topic.partitions.len())
            .filter(move |&p| shard_for(topic.id, p, shards) == shard)
            .map(|p| i32::try_from(p).expect("partition counts fit i32"))
    }
}

/// The shard of a broker with `shards` shards that owns `partition` of the topic with id
/// `topic_id`. Pure and stable: a partition keeps its shard when topics or partitions are
/// added; a topic's partitions go round the shards from a start given by its id, so each
/// topic is balanced (within one partition) and topics start on different shards.
pub fn shard_for(topic_id: Uuid, partition: usize, shards: usize) -> usize {
    let (high, low) = topic_id.as_u64_pair();
    let shards_u64 = u64::try_from(shards).expect("shard counts fit u64");
    let partition = u64::try_from(partition).expect("partition numbers fit u64");
    let shard = ((high ^ low) % shards_u64 + partition % shards_u64) % shards_u64;
    usize::try_from(shard).expect("below the shard count")
}

/// The effective config of `topic`: `defaults` with its overrides applied. Errors: an override
/// the config model refuses.
pub fn topic_config(
    topic: &TopicImage,
    defaults: &TopicConfig,
) -> Result<TopicConfig, ConfigError> {
    overrides_config(&topic.configs, defaults)
}

/// `defaults` with `overrides` applied. Errors: an override the config model refuses.
pub fn overrides_config(
    overrides: &BTreeMap<String, String>,
    defaults: &TopicConfig,
) -> Result<TopicConfig, ConfigError> {
    let mut config = TopicConfig::inherit(defaults);
    for (k, v) in overrides {
        config.set(k, v)?;
    }
    Ok(config)
}

/// The metadata file of brokers before the record log (`<data>/cluster-metadata.json`).
const LEGACY_FILE_NAME: &str = "cluster-metadata.json";
/// What the legacy file is renamed to once converted, so it is never read again.
const LEGACY_CONVERTED_NAME: &str = "cluster-metadata.json.converted";

/// One topic of the legacy file.
#[derive(Deserialize)]
struct LegacyTopic {
    id: Uuid,
    /// Owning shard of each partition: only the count is kept (placement is derived now).
    partition_shards: Vec<usize>,
    overrides: BTreeMap<String, String>,
}

/// The legacy file.
#[derive(Deserialize)]
struct LegacyMetadata {
    cluster_id: String,
    topics: BTreeMap<String, LegacyTopic>,
    #[serde(default)]
    next_producer_id: i64,
}

/// Opens the metadata of `data_dir` for broker `node_id`, creating it on first start.
///
/// A data directory from before the record log holds `cluster-metadata.json`: when there is
/// no snapshot yet, it is converted once — its topics (ids, partition counts, overrides; the
/// offsets topic flagged internal) and its next producer id become the first snapshot — and
/// then renamed to `cluster-metadata.json.converted`, which is kept for the operator and never
/// read again. Its shard placement is dropped (derived now). Blocking: call at start-up only.
/// Errors: unreadable or corrupt metadata files.
pub fn open(data_dir: &Path, node_id: i32) -> anyhow::Result<(MetadataStore, MetadataImage)> {
    if let Some(opened) = MetadataStore::open(data_dir)? {
        if opened.dropped_tail_bytes > 0 {
            tracing::warn!(
                bytes = opened.dropped_tail_bytes,
                "dropped a torn tail of the cluster metadata log (a change never acknowledged)"
            );
        }
        finish_conversion(data_dir)?;
        return Ok((opened.store, opened.image));
    }
    let legacy = data_dir.join(LEGACY_FILE_NAME);
    let image = match std::fs::read(&legacy) {
        Ok(bytes) => {
            let old: LegacyMetadata = serde_json::from_slice(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", legacy.display()))?;
            convert_legacy(old, node_id)
                .map_err(|e| anyhow::anyhow!("converting {}: {e}", legacy.display()))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            MetadataImage::new(Uuid::new_v4().simple().to_string())
        }
        Err(e) => return Err(anyhow::anyhow!("{}: {e}", legacy.display())),
    };
    let store = MetadataStore::create(data_dir, &image)?;
    if finish_conversion(data_dir)? {
        tracing::info!(
            topics = image.topics.len(),
            "converted {LEGACY_FILE_NAME} to the metadata record log"
        );
    }
    Ok((store, image))
}

/// Renames a converted legacy file out of the way (also after a crash that came between the
/// first snapshot and the rename); `true` when there was one.
fn finish_conversion(data_dir: &Path) -> anyhow::Result<bool> {
    let legacy = data_dir.join(LEGACY_FILE_NAME);
    match std::fs::rename(&legacy, data_dir.join(LEGACY_CONVERTED_NAME)) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(anyhow::anyhow!("renaming {}: {e}", legacy.display())),
    }
}

/// Registers broker `node_id` with a new incarnation (KRaft's RegisterBrokerRecord; its broker
/// epoch is the change's offset), appended durably to `store` and applied to `image`.
/// Blocking: call at start-up only. Errors: the append failed.
pub fn register_broker(
    store: &mut MetadataStore,
    image: &mut MetadataImage,
    node_id: i32,
    host: &str,
    port: u16,
) -> anyhow::Result<()> {
    let record = MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id: node_id,
        incarnation_id: Uuid::new_v4(),
        broker_epoch: i64::try_from(store.next_offset()).unwrap_or(i64::MAX),
        end_points: vec![BrokerEndpoint {
            name: "PLAINTEXT".to_string(),
            host: host.to_string(),
            port,
            security_protocol: SECURITY_PROTOCOL_PLAINTEXT,
        }],
        rack: None,
        fenced: false,
        in_controlled_shutdown: false,
    });
    store.append(std::slice::from_ref(&record))?;
    image.apply(&record)?;
    Ok(())
}

/// Kafka's `SecurityProtocol.PLAINTEXT` id, the only listener protocol Sluice serves.
const SECURITY_PROTOCOL_PLAINTEXT: i16 = 0;

/// The image the legacy metadata describes, every partition led by `node_id`.
fn convert_legacy(
    old: LegacyMetadata,
    node_id: i32,
) -> Result<MetadataImage, replication::metadata::ApplyError> {
    let mut records = Vec::new();
    for (name, topic) in old.topics {
        records.push(MetadataRecord::Topic(TopicRecord {
            internal: INTERNAL_TOPIC_NAMES.contains(&name.as_str()),
            name: name.clone(),
            topic_id: topic.id,
        }));
        for p in 0..topic.partition_shards.len() {
            records.push(MetadataRecord::Partition(PartitionRecord {
                partition_id: i32::try_from(p).unwrap_or(i32::MAX),
                topic_id: topic.id,
                replicas: vec![node_id],
                isr: vec![node_id],
                leader: node_id,
                leader_epoch: 0,
                partition_epoch: 0,
            }));
        }
        for (key, value) in topic.overrides {
            records.push(MetadataRecord::Config(ConfigRecord {
                resource_type: CONFIG_RESOURCE_TOPIC,
                resource_name: name.clone(),
                name: key,
                value: Some(value),
            }));
        }
    }
    if old.next_producer_id > 0 {
        records.push(MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: node_id,
            broker_epoch: -1,
            next_producer_id: old.next_producer_id,
        }));
    }
    let mut image = MetadataImage::new(old.cluster_id);
    for record in &records {
        image.apply(record)?;
    }
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_is_stable_and_balanced() {
        let id = Uuid::from_u128(0x1234_5678_9abc_def0_1122_3344_5566_7788);
        for shards in 1..=5 {
            let mut load = vec![0usize; shards];
            for p in 0..(shards * 7) {
                load[shard_for(id, p, shards)] += 1;
            }
            assert!(load.iter().all(|&n| n == 7), "{shards} shards: {load:?}");
        }
        // Adding partitions or topics moves no existing partition.
        let before: Vec<usize> = (0..10).map(|p| shard_for(id, p, 3)).collect();
        let after: Vec<usize> = (0..20).map(|p| shard_for(id, p, 3)).collect();
        assert_eq!(before[..], after[..10]);
    }

    #[test]
    fn legacy_metadata_converts_once_and_keeps_topics_and_producer_ids() {
        let dir = tempfile::tempdir().unwrap();
        let id = Uuid::from_u128(7);
        let legacy = serde_json::json!({
            "version": 3,
            "cluster_id": "abc",
            "topics": {
                "orders": {"id": id, "partition_shards": [0, 1, 0], "overrides": {"retention.ms": "5"}},
                "__consumer_offsets": {"id": Uuid::from_u128(8), "partition_shards": [1], "overrides": {}}
            },
            "next_producer_id": 42
        });
        std::fs::write(dir.path().join(LEGACY_FILE_NAME), legacy.to_string()).unwrap();
        let (_, image) = open(dir.path(), 1).unwrap();
        assert_eq!(image.cluster_id, "abc");
        let orders = &image.topics["orders"];
        assert_eq!(
            (orders.id, orders.partitions.len(), orders.internal),
            (id, 3, false)
        );
        assert_eq!(orders.configs["retention.ms"], "5");
        assert_eq!(orders.partitions[2].leader, 1);
        assert!(image.topics["__consumer_offsets"].internal);
        assert_eq!(image.producer_ids.next_producer_id, 42);
        assert!(!dir.path().join(LEGACY_FILE_NAME).exists());
        assert!(dir.path().join(LEGACY_CONVERTED_NAME).exists());
        let (_, reopened) = open(dir.path(), 1).unwrap();
        assert_eq!(reopened, image);
    }
}
