//! This broker's view of the cluster metadata: the controller's [`MetadataImage`] (topics,
//! partitions with their cluster assignment, configs, brokers, producer-id blocks) plus the
//! node-local placement of each partition on a shard, derived from the image by the pure
//! [`shard_for`]. The controller quorum's state machine on shard 0 keeps the image (see
//! `crate::controller`); every shard works from an immutable `Arc` snapshot pushed to it on
//! each change (DESIGN.md §2).
//!
//! Placement is not stored: partition directories are `<data>/<topic>-<partition>/`, whichever
//! shard opens them, so a broker restarted with another core count simply derives another
//! placement.

use replication::metadata::authorizer::AclIndex;
use replication::metadata::{
    ConfigRecord, MetadataImage, MetadataRecord, MetadataStore, PartitionImage, PartitionRecord,
    ProducerIdsRecord, TopicImage, TopicRecord, CONFIG_RESOURCE_TOPIC, INTERNAL_TOPIC_NAMES,
    LOG_FILE_NAME, SNAPSHOT_FILE_NAME,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tuning::config::{BrokerConfig, ConfigError, TopicConfig};
use uuid::Uuid;

/// The metadata image with this broker's shard count, from which partition placement follows,
/// and the active controller as this broker knows it.
#[derive(Clone, Debug)]
pub struct ClusterMetadata {
    pub image: MetadataImage,
    /// The active controller's node id (`None`: no quorum leader known).
    pub active_controller: Option<i32>,
    /// The metadata log index this image was published at (0 before the first): the
    /// finalized features' epoch in ApiVersions, as Kafka's image offset.
    pub metadata_offset: u64,
    /// This broker's `node.id`: it hosts the partitions it is a replica of.
    node_id: i32,
    shards: usize,
    /// The image's ACLs indexed for authorization decisions (`crate::authz`).
    pub acl_index: AclIndex,
}

/// A partition as this broker's image places it ([`ClusterMetadata::placement`]): what
/// routing an op to its owner and KIP-320's epoch check need, resolved once per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The owning shard, when this broker is one of the partition's replicas.
    pub owner: Option<usize>,
    /// Whether this broker leads the partition.
    pub leads: bool,
    /// The partition's leader epoch in the image.
    pub leader_epoch: i32,
}

/// The controller id Metadata and DescribeCluster give clients: the active controller when it
/// is among the `live` brokers, else the first live broker (which forwards), else -1. Kafka's
/// KRaft brokers name a random live broker; a client (Java's AdminClient) that is told a
/// controller missing from the broker list stalls looking for it.
pub fn controller_for_clients(meta: &ClusterMetadata, live: &[LiveBroker]) -> i32 {
    match meta.active_controller {
        Some(id) if live.iter().any(|b| b.id == id) => id,
        _ => live.first().map_or(-1, |b| b.id),
    }
}

/// A broker Metadata and DescribeCluster list: registered and not fenced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveBroker {
    pub id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

/// The endpoint of listener `listener` (upper case) of broker `node` as registered in
/// `meta`, as `(host, port)`, or `None` when the broker is not registered or has no such
/// listener. Other brokers are reached on `inter.broker.listener.name`.
pub fn broker_endpoint(meta: &ClusterMetadata, node: i32, listener: &str) -> Option<(String, u16)> {
    let endpoint = meta
        .image
        .brokers
        .get(&node)?
        .end_points
        .iter()
        .find(|e| e.name == listener)?;
    Some((endpoint.host.clone(), endpoint.port))
}

/// The live brokers of `meta` by id with their endpoint on listener `listener` (Kafka
/// answers each client with the endpoints of the listener it connected to, and leaves out
/// the brokers without one); this one, from `config`'s advertised listeners, also while its
/// registration is not in the image yet (at start-up).
pub fn live_brokers(
    meta: &ClusterMetadata,
    config: &BrokerConfig,
    listener: &str,
) -> Vec<LiveBroker> {
    let mut live: Vec<LiveBroker> = meta
        .image
        .brokers
        .iter()
        .filter(|(_, b)| !b.fenced)
        .filter_map(|(id, b)| {
            let endpoint = b.end_points.iter().find(|e| e.name == listener)?;
            Some(LiveBroker {
                id: *id,
                host: endpoint.host.clone(),
                port: endpoint.port,
                rack: b.rack.clone(),
            })
        })
        .collect();
    if !meta.image.brokers.contains_key(&config.node_id) {
        if let Some(advertised) = config
            .advertised_endpoints()
            .into_iter()
            .find(|a| a.name == listener)
        {
            live.push(LiveBroker {
                id: config.node_id,
                host: advertised.host_port.host,
                port: advertised.host_port.port,
                rack: None,
            });
            live.sort_by_key(|b| b.id);
        }
    }
    live
}

/// Read through to the image: `metadata.topics`, `metadata.cluster_id`, …
impl std::ops::Deref for ClusterMetadata {
    type Target = MetadataImage;
    fn deref(&self) -> &MetadataImage {
        &self.image
    }
}

impl ClusterMetadata {
    /// `image` as seen by broker `node_id` of `shards` shards (at least one).
    pub fn new(image: MetadataImage, shards: usize, node_id: i32) -> ClusterMetadata {
        assert!(shards > 0, "a broker has at least one shard");
        ClusterMetadata {
            acl_index: AclIndex::new(image.acls.values()),
            image,
            active_controller: None,
            metadata_offset: 0,
            node_id,
            shards,
        }
    }

    /// The partition `topic`/`partition`, if it exists.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionImage> {
        let t = self.image.topics.get(topic)?;
        t.partitions.get(usize::try_from(partition).ok()?)
    }

    /// Where partition `partition` of `topic` (a topic of this image, looked up once by the
    /// request) is served on this broker; `None` when the topic has no such partition. A
    /// handler resolves each partition so, from the one snapshot it took for the request,
    /// and routes with it (`partitions::service::call_placed`): no second lookup.
    pub fn placement(&self, topic: &TopicImage, partition: i32) -> Option<Placement> {
        let index = usize::try_from(partition).ok()?;
        let p = topic.partitions.get(index)?;
        let hosted = p.replicas.contains(&self.node_id);
        Some(Placement {
            owner: hosted.then(|| shard_for(topic.id, index, self.shards)),
            leads: p.leader == self.node_id,
            leader_epoch: p.leader_epoch,
        })
    }

    /// [`ClusterMetadata::placement`] of topic `topic` by name (one lookup of the topic).
    pub fn placement_of(&self, topic: &str, partition: i32) -> Option<Placement> {
        self.placement(self.image.topics.get(topic)?, partition)
    }

    /// Owning shard of `topic`/`partition`, if it exists and this broker is one of its
    /// replicas.
    pub fn owner(&self, topic: &str, partition: i32) -> Option<usize> {
        let t = self.image.topics.get(topic)?;
        let p = usize::try_from(partition).ok()?;
        let hosted = t.partitions.get(p)?.replicas.contains(&self.node_id);
        hosted.then(|| shard_for(t.id, p, self.shards))
    }

    /// The broker epoch the image registers for broker `node` (KIP-903; fenced or not), or
    /// `None` when it is not registered.
    pub fn registered_broker_epoch(&self, node: i32) -> Option<i64> {
        self.image.brokers.get(&node).map(|b| b.broker_epoch)
    }

    /// Whether this broker leads `topic`/`partition`.
    pub fn leads(&self, topic: &str, partition: i32) -> bool {
        self.partition(topic, partition)
            .is_some_and(|p| p.leader == self.node_id)
    }

    /// The partitions of `topic` of which this broker is a replica and its shard `shard`
    /// the owner.
    pub fn owned_partitions<'a>(
        &self,
        topic: &'a TopicImage,
        shard: usize,
    ) -> impl Iterator<Item = i32> + 'a {
        let (shards, node_id) = (self.shards, self.node_id);
        (0..topic.partitions.len())
            .filter(move |&p| {
                topic.partitions[p].replicas.contains(&node_id)
                    && shard_for(topic.id, p, shards) == shard
            })
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

/// The effective config of `topic`: `defaults` with its stored overrides applied. Stored
/// overrides were validated when they were set; the checks across keys are not run again
/// (Kafka runs `validateValues` only on create and alter), so a later change of a broker
/// default never makes a topic's config invalid. An override that no longer parses is logged
/// and left out, never the others with it (falling back to the defaults wholesale would turn
/// a compacted topic into one whose retention deletes).
pub fn topic_config(topic: &TopicImage, defaults: &TopicConfig) -> TopicConfig {
    let mut config = TopicConfig::inherit(defaults);
    for (k, v) in &topic.configs {
        if let Err(e) = config.set(k, v) {
            tracing::error!(topic_id = %topic.id, key = %k, value = %v, error = %e, "stored topic config no longer parses; left out");
        }
    }
    config
}

/// `defaults` with `overrides` applied, checked as Kafka checks a topic's configs on create
/// and alter. Errors: an override the config model refuses, or the checks across keys
/// ([`TopicConfig::validate`]).
pub fn overrides_config(
    overrides: &BTreeMap<String, String>,
    defaults: &TopicConfig,
) -> Result<TopicConfig, ConfigError> {
    let mut config = TopicConfig::inherit(defaults);
    for (k, v) in overrides {
        config.set(k, v)?;
    }
    config.validate()?;
    Ok(config)
}

/// The metadata file of brokers before the record log (`<data>/cluster-metadata.json`).
const LEGACY_FILE_NAME: &str = "cluster-metadata.json";

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

/// The image of a single-node broker's metadata store from before the controller quorum, with
/// the files it was read from (to rename once carried over), or `None` when `data_dir` has
/// none. Two older forms: the record log + snapshot (`cluster-metadata.log`/`.snapshot`, its
/// torn tail cut as at every start), and before it `cluster-metadata.json` (its topics —
/// ids, partition counts, overrides, the offsets topic flagged internal — led by `node_id`,
/// and its next producer id; its shard placement is dropped, being derived now). Blocking:
/// call at start-up only. Errors: unreadable or corrupt metadata files.
pub fn read_single_node_store(
    data_dir: &Path,
    node_id: i32,
) -> anyhow::Result<Option<(MetadataImage, Vec<PathBuf>)>> {
    if let Some(opened) = MetadataStore::open(data_dir)? {
        let files = [LOG_FILE_NAME, SNAPSHOT_FILE_NAME, LEGACY_FILE_NAME]
            .iter()
            .map(|name| data_dir.join(name))
            .filter(|path| path.exists())
            .collect();
        return Ok(Some((opened.image, files)));
    }
    let legacy = data_dir.join(LEGACY_FILE_NAME);
    match std::fs::read(&legacy) {
        Ok(bytes) => {
            let old: LegacyMetadata = serde_json::from_slice(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", legacy.display()))?;
            let image = convert_legacy(old, node_id)
                .map_err(|e| anyhow::anyhow!("converting {}: {e}", legacy.display()))?;
            Ok(Some((image, vec![legacy])))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", legacy.display())),
    }
}

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
                removing_replicas: Vec::new(),
                adding_replicas: Vec::new(),
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

    /// Each client is told the endpoints of its own listener; a broker without that listener
    /// is left out; this broker, not yet registered, is listed from its config.
    #[test]
    fn live_brokers_by_listener() {
        use replication::metadata::{BrokerEndpoint, BrokerRegistration};
        let endpoint = |name: &str, port| BrokerEndpoint {
            name: name.into(),
            host: "h".into(),
            port,
            security_protocol: 0,
        };
        let registration = |end_points| BrokerRegistration {
            incarnation_id: Uuid::nil(),
            broker_epoch: 1,
            end_points,
            rack: None,
            fenced: false,
            in_controlled_shutdown: false,
        };
        let mut image = MetadataImage::default();
        image.brokers.insert(
            1,
            registration(vec![endpoint("INTERNAL", 1001), endpoint("EXTERNAL", 2001)]),
        );
        image
            .brokers
            .insert(2, registration(vec![endpoint("INTERNAL", 1002)]));
        let meta = ClusterMetadata::new(image, 1, 3);
        let mut config = BrokerConfig::default();
        config
            .set_all([
                (
                    "listeners",
                    "INTERNAL://127.0.0.1:1003,EXTERNAL://127.0.0.1:2003",
                ),
                (
                    "listener.security.protocol.map",
                    "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
                ),
                ("node.id", "3"),
            ])
            .expect("valid");
        let ports = |listener| -> Vec<(i32, u16)> {
            live_brokers(&meta, &config, listener)
                .into_iter()
                .map(|b| (b.id, b.port))
                .collect()
        };
        assert_eq!(ports("INTERNAL"), [(1, 1001), (2, 1002), (3, 1003)]);
        assert_eq!(ports("EXTERNAL"), [(1, 2001), (3, 2003)]);
        assert_eq!(
            broker_endpoint(&meta, 1, "EXTERNAL"),
            Some(("h".into(), 2001))
        );
        assert_eq!(broker_endpoint(&meta, 2, "EXTERNAL"), None);
    }

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
    fn legacy_metadata_keeps_topics_and_producer_ids() {
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
        let (image, files) = read_single_node_store(dir.path(), 1).unwrap().unwrap();
        assert_eq!(files, [dir.path().join(LEGACY_FILE_NAME)]);
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
        let empty = tempfile::tempdir().unwrap();
        assert!(read_single_node_store(empty.path(), 1).unwrap().is_none());
    }
}
