//! KIP-951's leader hints, shared by Produce v10+ and Fetch v16+: a partition answered
//! NOT_LEADER_OR_FOLLOWER (Fetch: or FENCED_LEADER_EPOCH) names its current leader and leader
//! epoch, and the response lists the endpoint of each such leader that is alive, once, as
//! Kafka's `KafkaApis.getCurrentLeader` and `MetadataCache.getAliveBrokerNode` give them. The
//! hints come from this broker's metadata image; Kafka asks the local partition first and
//! the image after, which agree here because a partition's role is set from the image.

use crate::metadata::{ClusterMetadata, LiveBroker};

/// Collects the leaders named in one response and their endpoints.
pub struct LeaderHints<'a> {
    meta: &'a ClusterMetadata,
    /// The listener the client connected to: the endpoints named are on it.
    listener: &'a str,
    /// The alive leaders named so far, each once, in the order first named.
    endpoints: Vec<LiveBroker>,
}

impl<'a> LeaderHints<'a> {
    /// No leader named yet, from the image in `meta`, for a client of `listener`.
    pub fn new(meta: &'a ClusterMetadata, listener: &'a str) -> LeaderHints<'a> {
        LeaderHints {
            meta,
            listener,
            endpoints: Vec::new(),
        }
    }

    /// The current leader of `topic`/`partition` as `(leader id, leader epoch)` — `(-1, -1)`
    /// for a partition not in the image — whose endpoint, when the leader is registered and
    /// not fenced, is added to [`LeaderHints::endpoints`].
    pub fn current_leader(&mut self, topic: &str, partition: i32) -> (i32, i32) {
        let (leader_id, leader_epoch) = self
            .meta
            .partition(topic, partition)
            .map_or((-1, -1), |image| (image.leader, image.leader_epoch));
        if !self.endpoints.iter().any(|b| b.id == leader_id) {
            if let Some(endpoint) = alive_endpoint(self.meta, leader_id, self.listener) {
                self.endpoints.push(endpoint);
            }
        }
        (leader_id, leader_epoch)
    }

    /// The endpoints of the alive leaders named, each once.
    pub fn endpoints(self) -> Vec<LiveBroker> {
        self.endpoints
    }
}

/// The endpoint on `listener` of broker `node` if it is registered, not fenced and has one
/// (Kafka's `getAliveBrokerNode` by listener name).
fn alive_endpoint(meta: &ClusterMetadata, node: i32, listener: &str) -> Option<LiveBroker> {
    let broker = meta.image.brokers.get(&node).filter(|b| !b.fenced)?;
    let endpoint = broker.end_points.iter().find(|e| e.name == listener)?;
    Some(LiveBroker {
        id: node,
        host: endpoint.host.clone(),
        port: endpoint.port,
        rack: broker.rack.clone(),
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use replication::metadata::{
        BrokerEndpoint, BrokerRegistration, MetadataImage, PartitionImage, TopicImage,
    };

    fn registration(port: u16, fenced: bool) -> BrokerRegistration {
        BrokerRegistration {
            incarnation_id: uuid::Uuid::nil(),
            broker_epoch: 1,
            end_points: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port,
                security_protocol: 0,
            }],
            rack: None,
            fenced,
            in_controlled_shutdown: false,
        }
    }

    /// Brokers 1 (alive, port 9001) and 2 (fenced); topic "t" with partitions led by 1 (epoch
    /// 4), 1 (epoch 5) and 2 (epoch 6), seen by broker 3.
    pub(in crate::handlers) fn metadata() -> ClusterMetadata {
        let mut image = MetadataImage::default();
        image.brokers.insert(1, registration(9001, false));
        image.brokers.insert(2, registration(9002, true));
        let partition = |leader, leader_epoch| PartitionImage {
            replicas: vec![1, 2, 3],
            isr: vec![leader],
            leader,
            leader_epoch,
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        };
        image.topics.insert(
            "t".into(),
            TopicImage {
                id: uuid::Uuid::from_u128(1),
                internal: false,
                partitions: vec![partition(1, 4), partition(1, 5), partition(2, 6)],
                configs: Default::default(),
            },
        );
        ClusterMetadata::new(image, 1, 3)
    }

    #[test]
    fn each_alive_leader_is_named_once_and_unknown_partitions_have_none() {
        let meta = metadata();
        let mut hints = LeaderHints::new(&meta, "PLAINTEXT");
        assert_eq!(hints.current_leader("t", 0), (1, 4));
        assert_eq!(hints.current_leader("t", 1), (1, 5));
        // A fenced leader is named, its endpoint is not given.
        assert_eq!(hints.current_leader("t", 2), (2, 6));
        assert_eq!(hints.current_leader("t", 3), (-1, -1));
        assert_eq!(hints.current_leader("gone", 0), (-1, -1));
        let endpoints = hints.endpoints();
        assert_eq!(endpoints.len(), 1);
        assert_eq!((endpoints[0].id, endpoints[0].port), (1, 9001));
    }
}
