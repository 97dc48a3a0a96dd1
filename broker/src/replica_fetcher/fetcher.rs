//! One replica fetcher's loop, its Fetch exchange with the leader, and [`reconcile`] (see
//! the parent module).

use super::session::{FetcherSession, SessionFetch, Wanted};
use super::FETCHER_SHARD;
use crate::metadata::{broker_endpoint, ClusterMetadata};
use crate::partitions::service::call_replica;
use crate::partitions::{PartitionOp, PartitionReply};
use crate::peer::{PeerError, PeerStream};
use crate::replication_quota as quota;
use crate::rt::TcpStream;
use crate::shard::Shard;
use bytes::{Buf, Bytes};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, ReplicaState};
use net::kafka_protocol::messages::fetch_response::PartitionData;
use net::kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use net::kafka_protocol::messages::{
    ApiKey, BrokerId, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, ResponseHeader,
    TopicName,
};
use net::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::{LeaderEpoch, Offset, TopicPartition};
use uuid::Uuid;

/// `replica.fetch.wait.max.ms` (Kafka's default): how long the leader may park a fetch, ms.
pub const REPLICA_FETCH_WAIT_MAX_MS: i32 = 500;
/// `replica.fetch.min.bytes` (Kafka's default): the leader answers once this much is there.
pub const REPLICA_FETCH_MIN_BYTES: i32 = 1;
/// `replica.fetch.max.bytes` (Kafka's default): bytes asked per partition (the first batch
/// comes whole, KIP-74).
pub const REPLICA_FETCH_MAX_BYTES: i32 = 1 << 20;
/// `replica.fetch.response.max.bytes` (Kafka's default): bytes asked per fetch.
pub const REPLICA_FETCH_RESPONSE_MAX_BYTES: i32 = 10 << 20;
/// Largest response frame read from a leader, bytes: the asked maximum, one whole first
/// batch past it (`message.max.bytes` up to 8 MiB) and the headers.
pub const RESPONSE_FRAME_BYTES_MAX: usize = 32 << 20;
/// `replica.socket.timeout.ms` (Kafka's default): how long one fetch exchange, connection
/// included, may take.
pub const REPLICA_SOCKET_TIMEOUT: Duration = Duration::from_secs(30);
/// The first back-off after an error.
pub const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// The longest back-off (the first doubles up to it while errors go on).
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// The wait when every partition of a fetcher is held back by the follower's throttle, before
/// the throttle and the ISR are looked at again. Kafka waits `replica.fetch.backoff.ms` (1 s);
/// a replica the leader has just taken into the ISR is no longer throttled, and the leader's
/// `acks=all` produces wait for it: a fetcher asleep for a second then would hold them up to
/// that second.
pub const THROTTLED_BACKOFF: Duration = BACKOFF_MIN;
/// The Fetch version the fetchers speak (every node is a Sluice broker, which serves it):
/// topic ids (v13+, KIP-516), the broker epoch in `ReplicaState` (v15+, KIP-903), diverging
/// epochs (v12+, KIP-320).
const FETCH_VERSION: i16 = 16;
/// The ListOffsets version the fetchers speak to ask a leader's range after
/// OFFSET_OUT_OF_RANGE (Sluice serves 1–7): the current leader epoch (v4+, KIP-320).
const LIST_OFFSETS_VERSION: i16 = 7;
/// ListOffsets' `timestamp` for the latest offset (to a replica: the log end offset).
const LATEST_TIMESTAMP: i64 = -1;
/// ListOffsets' `timestamp` for the earliest offset (the log start offset).
const EARLIEST_TIMESTAMP: i64 = -2;
const CLIENT_ID: &str = "sluice-replica-fetcher";

/// Why one fetch exchange with a leader failed.
#[derive(Debug, thiserror::Error)]
pub enum FetcherError {
    #[error("leader {leader} has no registered endpoint")]
    UnknownEndpoint { leader: i32 },
    #[error("leader {leader}'s endpoint {host}:{port} does not resolve")]
    Unresolved {
        leader: i32,
        host: String,
        port: u16,
    },
    #[error("I/O with leader {leader}: {source}")]
    Io { leader: i32, source: std::io::Error },
    #[error("securing the connection to leader {leader}: {source}")]
    Peer { leader: i32, source: PeerError },
    #[error("leader {leader} did not answer within {timeout:?}")]
    TimedOut { leader: i32, timeout: Duration },
    #[error("leader {leader} sent a response frame of {size_bytes} bytes (at most {RESPONSE_FRAME_BYTES_MAX})")]
    FrameTooLarge { leader: i32, size_bytes: usize },
    #[error("leader {leader} answered correlation id {got}, not {expected}")]
    CorrelationMismatch {
        leader: i32,
        expected: i32,
        got: i32,
    },
    #[error("leader {leader}'s {api} response does not decode: {reason}")]
    Decode {
        leader: i32,
        api: &'static str,
        reason: String,
    },
    #[error("encoding the {api} request: {reason}")]
    Encode { api: &'static str, reason: String },
    #[error("the follower's out-of-range truncation failed: {reply}")]
    Truncation { reply: String },
    #[error("leader {leader} refused the {api} with error code {error_code}")]
    Refused {
        leader: i32,
        api: &'static str,
        error_code: i16,
    },
}

impl FetcherError {
    /// Whether the connection may be out of step after this error (a transport error, or
    /// bytes that did not decode as the answer): it is closed and opened again.
    fn breaks_connection(&self) -> bool {
        match self {
            FetcherError::Io { .. }
            | FetcherError::Peer { .. }
            | FetcherError::TimedOut { .. }
            | FetcherError::FrameTooLarge { .. }
            | FetcherError::CorrelationMismatch { .. }
            | FetcherError::Decode { .. } => true,
            FetcherError::UnknownEndpoint { .. }
            | FetcherError::Unresolved { .. }
            | FetcherError::Encode { .. }
            | FetcherError::Truncation { .. }
            | FetcherError::Refused { .. } => false,
        }
    }
}

/// Starts a fetcher for every leader `shard`'s metadata has this broker follow, and ends
/// the fetchers of leaders it follows no more. Called on [`FETCHER_SHARD`] after every shard
/// installed a new image (so each partition's role is set before it is fetched).
pub fn reconcile(shard: &Rc<Shard>) {
    assert_eq!(shard.id, FETCHER_SHARD, "replica fetchers run on one shard");
    let leaders = followed_leaders(&shard.metadata(), shard.config.node_id);
    shard.replica_fetchers.retain(&leaders);
    shard.replica_fetchers.installed.notify_all();
    for leader in leaders {
        shard.replica_fetchers.start_if_absent(leader, || {
            tracing::info!(leader, "starting replica fetcher");
            crate::rt::spawn_local(run(shard.clone(), leader))
        });
    }
}

/// The leaders of the partitions `node` follows in `meta`.
fn followed_leaders(meta: &ClusterMetadata, node: i32) -> BTreeSet<i32> {
    meta.topics
        .values()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.leader >= 0 && p.leader != node && p.replicas.contains(&node))
        .map(|p| p.leader)
        .collect()
}

/// What the metadata says of a followed partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Followed {
    leader_epoch: LeaderEpoch,
    /// Its topic's id (KIP-516): Fetch v13+ names topics by it.
    topic_id: Uuid,
}

/// The partitions `node` follows of `leader` in `meta`, with their leader epochs and topic
/// ids.
fn followed_partitions(
    meta: &ClusterMetadata,
    node: i32,
    leader: i32,
) -> HashMap<TopicPartition, Followed> {
    let mut out = HashMap::new();
    for (name, topic) in &meta.topics {
        for (index, p) in topic.partitions.iter().enumerate() {
            if leader == node || p.leader != leader || !p.replicas.contains(&node) {
                continue;
            }
            let Ok(partition) = i32::try_from(index) else {
                continue;
            };
            let tp = TopicPartition {
                topic: name.clone(),
                partition,
            };
            out.insert(
                tp,
                Followed {
                    leader_epoch: LeaderEpoch(p.leader_epoch),
                    topic_id: topic.id,
                },
            );
        }
    }
    out
}

/// Where a partition's next fetch starts.
#[derive(Clone, Copy, Debug)]
struct Position {
    fetch_offset: Offset,
    last_fetched_epoch: Option<LeaderEpoch>,
    /// The follower's log start offset, sent as Kafka's follower sends it.
    log_start_offset: Offset,
    /// The leader epoch the metadata gave when the position was taken (Fetch's
    /// `current_leader_epoch`) and the topic's id; a new epoch, or a topic deleted and
    /// created again, takes the position again.
    followed: Followed,
}

/// The partitions in back-off after an error (Kafka's `delayPartitions`): each is left out of
/// the fetches until its time comes, so one failing partition does not slow the others.
/// Holds at most the fetcher's partitions (pruned with them every round). A back-off belongs
/// to the leader epoch it failed at: a new epoch in the image (the error was most often the
/// stale epoch's FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH) ends it, so a follower whose
/// image lagged the leader's by a few rounds fetches at once, not after a doubled back-off.
#[derive(Default)]
struct Delays {
    /// Per partition: when it is fetched again, its back-off (doubling per error) and what
    /// the image said of it at the error.
    until: HashMap<TopicPartition, (Instant, Duration, Followed)>,
}

impl Delays {
    /// Backs `tp`, followed as `followed`, off: [`BACKOFF_MIN`] after its first error at
    /// `followed`, doubling up to [`BACKOFF_MAX`].
    fn delay(&mut self, tp: TopicPartition, followed: Followed, now: Instant) {
        let backoff = match self.until.get(&tp) {
            Some((_, b, at)) if *at == followed => (*b * 2).min(BACKOFF_MAX),
            _ => BACKOFF_MIN,
        };
        self.until.insert(tp, (now + backoff, backoff, followed));
    }

    fn is_delayed(&self, tp: &TopicPartition, now: Instant) -> bool {
        self.until.get(tp).is_some_and(|(until, ..)| *until > now)
    }

    /// Whether `tp` is in a back-off that began while it was followed as `followed` (a new
    /// image's leader epoch ends it, [`Delays::retain`]).
    fn is_delayed_at(&self, tp: &TopicPartition, followed: Followed, now: Instant) -> bool {
        self.until
            .get(tp)
            .is_some_and(|(until, _, at)| *until > now && *at == followed)
    }

    /// `tp` was fetched and appended: its next error starts from [`BACKOFF_MIN`].
    fn clear(&mut self, tp: &TopicPartition) {
        self.until.remove(tp);
    }

    /// Keeps the back-offs of the partitions `followed` still lists as they were at the error.
    fn retain(&mut self, followed: &HashMap<TopicPartition, Followed>) {
        self.until
            .retain(|tp, (.., at)| followed.get(tp) == Some(&*at));
    }

    /// How long until the first delayed partition is due (`None`: none is delayed).
    fn next_due(&self, now: Instant) -> Option<Duration> {
        self.until
            .values()
            .map(|(until, ..)| until.saturating_duration_since(now))
            .min()
    }
}

/// One fetcher: fetches from `leader` until its task is dropped or the shard stops.
async fn run(shard: Rc<Shard>, leader: i32) {
    let node = shard.config.node_id;
    let mut positions: HashMap<TopicPartition, Position> = HashMap::new();
    let mut delays = Delays::default();
    let mut connection: Option<PeerStream> = None;
    let mut session = FetcherSession::default();
    let mut connection_backoff = BACKOFF_MIN;
    let mut correlation_id: i32 = 0;
    while !shard.stop.is_requested() {
        let image = shard.metadata();
        let followed = followed_partitions(&image, node, leader);
        positions.retain(|tp, p| followed.get(tp) == Some(&p.followed));
        delays.retain(&followed);
        take_positions(&shard, leader, &followed, &mut positions, &mut delays).await;
        if positions.is_empty() {
            // Nothing to fetch now: with a partition delayed, look again after BACKOFF_MIN (it
            // may be due, or a new image may have ended its back-off); with none (nothing is
            // followed from this leader now), after BACKOFF_MAX.
            let wait = if delays.until.is_empty() {
                BACKOFF_MAX
            } else {
                BACKOFF_MIN
            };
            if shard.sleep_unless_stopped(wait).await {
                return;
            }
            continue;
        }
        // KIP-73: over the follower's throttle, the throttled partitions wait.
        let throttled = throttled_partitions(&shard, &positions);
        let held_back = !throttled.is_empty()
            && shard
                .replica_fetchers
                .throttle_exceeded(follower_throttled_rate(&shard));
        let unthrottled: HashMap<TopicPartition, Position>;
        let request = if held_back {
            unthrottled = positions
                .iter()
                .filter(|(tp, _)| !throttled.contains(*tp))
                .map(|(tp, p)| (tp.clone(), *p))
                .collect();
            &unthrottled
        } else {
            &positions
        };
        if request.is_empty() {
            if shard.sleep_unless_stopped(THROTTLED_BACKOFF).await {
                return;
            }
            continue;
        }
        // An image installed while the positions were taken may give this fetcher more.
        if !Arc::ptr_eq(&image, &shard.metadata())
            && has_new_partitions(&shard, leader, &positions, &delays)
        {
            continue;
        }
        correlation_id = correlation_id.wrapping_add(1);
        let fetch = session.next_fetch(wanted(request));
        let max_wait_ms = fetch_wait_ms(delays.next_due(Instant::now()));
        let answer = futures_lite::future::or(
            async {
                let exchange = fetch_once(
                    &shard,
                    leader,
                    &mut connection,
                    &fetch,
                    max_wait_ms,
                    correlation_id,
                );
                Some(exchange.await)
            },
            async {
                new_partitions_installed(&shard, leader, &positions, &delays).await;
                None
            },
        )
        .await;
        let Some(answer) = answer else {
            // The parked fetch is given up with its connection (its answer would come after
            // it, on the same connection): the next round fetches the new partitions at once.
            tracing::debug!(leader, "new partitions to follow: parked fetch given up");
            connection = None;
            session.reset();
            continue;
        };
        match answer {
            Ok(response) => {
                session.answered(fetch, response.session_id);
                let bytes = throttled_bytes(&response, &positions, &throttled);
                if bytes > 0 {
                    shard.replica_fetchers.record_throttled(bytes);
                }
                let out_of_range =
                    apply_response(&shard, leader, &mut positions, &mut delays, response).await;
                reset_all_out_of_range(
                    &shard,
                    leader,
                    &mut connection,
                    &mut correlation_id,
                    &mut positions,
                    &mut delays,
                    out_of_range,
                )
                .await;
                connection_backoff = BACKOFF_MIN;
            }
            Err(e) => {
                tracing::warn!(leader, error = %e, backoff = ?connection_backoff, "replica fetch failed");
                connection = None;
                session.reset();
                if shard.sleep_unless_stopped(connection_backoff).await {
                    return;
                }
                connection_backoff = (connection_backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// Whether the installed image has this broker follow, from `leader`, a partition at a leader
/// epoch that `positions` (what a fetch asks) does not hold and that is not in back-off at
/// that epoch: a partition new to this leader, or at a new leader epoch.
fn has_new_partitions(
    shard: &Shard,
    leader: i32,
    positions: &HashMap<TopicPartition, Position>,
    delays: &Delays,
) -> bool {
    let now = Instant::now();
    followed_partitions(&shard.metadata(), shard.config.node_id, leader)
        .iter()
        .any(|(tp, f)| {
            positions.get(tp).map(|p| p.followed) != Some(*f) && !delays.is_delayed_at(tp, *f, now)
        })
}

/// Resolves once an image installed after this call [`has_new_partitions`]. Until then a
/// fetch parked on partitions with nothing new would hold a new one up to
/// `replica.fetch.wait.max.ms`; measured (issue #30 point 1), every `acks=all` produce of a
/// partition whose leadership moved to its leader waited those 500 ms when this fetcher was
/// parked on idle `__consumer_offsets` partitions. Kafka's fetcher thread waits them out.
async fn new_partitions_installed(
    shard: &Shard,
    leader: i32,
    positions: &HashMap<TopicPartition, Position>,
    delays: &Delays,
) {
    loop {
        shard.replica_fetchers.image_installed().await;
        if has_new_partitions(shard, leader, positions, delays) {
            return;
        }
    }
}

/// The partitions of `positions` whose follower fetches are throttled (KIP-73): their topic
/// lists this broker's replica in `follower.replication.throttled.replicas` and the image
/// does not have it in the ISR (Kafka throttles only replicas out of sync).
fn throttled_partitions(
    shard: &Shard,
    positions: &HashMap<TopicPartition, Position>,
) -> HashSet<TopicPartition> {
    let meta = shard.metadata();
    let node = shard.config.node_id;
    positions
        .keys()
        .filter(|tp| {
            let Some(topic) = meta.topics.get(&tp.topic) else {
                return false;
            };
            let isr = usize::try_from(tp.partition)
                .ok()
                .and_then(|p| topic.partitions.get(p))
                .map_or(&[][..], |p| &p.isr[..]);
            quota::is_follower_throttled(
                topic
                    .configs
                    .get(quota::FOLLOWER_THROTTLED_REPLICAS)
                    .map(String::as_str),
                tp.partition,
                node,
                isr,
            )
        })
        .cloned()
        .collect()
}

/// `follower.replication.throttled.rate` in effect on this broker, bytes per second: its
/// dynamic value (this broker's, else the cluster default), else the start-up config's.
fn follower_throttled_rate(shard: &Shard) -> u64 {
    let meta = shard.metadata();
    crate::dynamic_config::DynamicBrokerConfigs::of(&meta.broker_configs, shard.config.node_id)
        .lookup(quota::FOLLOWER_THROTTLED_RATE)
        .and_then(|(value, _)| value.trim().parse().ok())
        .unwrap_or(shard.config.follower_replication_throttled_rate)
}

/// The record bytes `response` carries for the `throttled` partitions.
fn throttled_bytes(
    response: &FetchResponse,
    positions: &HashMap<TopicPartition, Position>,
    throttled: &HashSet<TopicPartition>,
) -> u64 {
    if throttled.is_empty() {
        return 0;
    }
    let names: HashMap<Uuid, &str> = positions
        .iter()
        .map(|(tp, p)| (p.followed.topic_id, tp.topic.as_str()))
        .collect();
    let mut bytes = 0u64;
    for topic in &response.responses {
        let Some(name) = names.get(&topic.topic_id) else {
            continue;
        };
        for data in &topic.partitions {
            let tp = TopicPartition {
                topic: (*name).to_string(),
                partition: data.partition_index,
            };
            if throttled.contains(&tp) {
                let len = data.records.as_ref().map_or(0, Bytes::len);
                bytes = bytes.saturating_add(u64::try_from(len).unwrap_or(u64::MAX));
            }
        }
    }
    bytes
}

/// Asks the owning shard the follower position of each of `followed` that has none and is
/// not delayed; a partition whose position is unavailable is delayed.
async fn take_positions(
    shard: &Rc<Shard>,
    leader: i32,
    followed: &HashMap<TopicPartition, Followed>,
    positions: &mut HashMap<TopicPartition, Position>,
    delays: &mut Delays,
) {
    let now = Instant::now();
    for (tp, now_followed) in followed {
        if positions.contains_key(tp) || delays.is_delayed(tp, now) {
            continue;
        }
        match call_replica(shard, tp.clone(), PartitionOp::FollowerPosition).await {
            PartitionReply::FollowerPosition {
                fetch_offset,
                last_fetched_epoch,
                log_start_offset,
            } => {
                positions.insert(
                    tp.clone(),
                    Position {
                        fetch_offset,
                        last_fetched_epoch,
                        log_start_offset,
                        followed: *now_followed,
                    },
                );
            }
            other => {
                tracing::debug!(%tp, leader, reply = ?other, "follower position unavailable");
                delays.delay(tp.clone(), *now_followed, Instant::now());
            }
        }
    }
}

/// Resets each partition of `out_of_range` from the leader ([`reset_out_of_range`], two
/// exchanges each over `connection`); one that cannot be reset loses its position and is
/// delayed.
async fn reset_all_out_of_range(
    shard: &Rc<Shard>,
    leader: i32,
    connection: &mut Option<PeerStream>,
    correlation_id: &mut i32,
    positions: &mut HashMap<TopicPartition, Position>,
    delays: &mut Delays,
    out_of_range: Vec<(TopicPartition, Position)>,
) {
    for (tp, position) in out_of_range {
        // Two exchanges: the ids after the last one used.
        let first_id = correlation_id.wrapping_add(1);
        *correlation_id = correlation_id.wrapping_add(2);
        let reset = reset_out_of_range(shard, leader, connection, first_id, &tp, position).await;
        match reset {
            Ok(position) => {
                positions.insert(tp, position);
            }
            Err(e) => {
                tracing::warn!(%tp, leader, error = %e, "out-of-range fetch offset not reset");
                if e.breaks_connection() {
                    *connection = None;
                }
                positions.remove(&tp);
                delays.delay(tp, position.followed, Instant::now());
            }
        }
    }
}

/// Hands each answered partition of `response` to its owning shard and takes its next
/// position; a partition that failed loses its position (asked again) and is delayed, except
/// one the leader answered OFFSET_OUT_OF_RANGE: it is returned with its position, for
/// [`reset_out_of_range`] (Kafka's `handleOutOfRangeError`). The
/// partitions' appends (or truncations) run concurrently, each on its owning shard: a fetch
/// round waits for the slowest write, not for the sum of them (Kafka's fetcher thread appends
/// one after another, but its appends do not wait for the device).
async fn apply_response(
    shard: &Rc<Shard>,
    leader: i32,
    positions: &mut HashMap<TopicPartition, Position>,
    delays: &mut Delays,
    response: FetchResponse,
) -> Vec<(TopicPartition, Position)> {
    let mut out_of_range = Vec::new();
    let names: HashMap<Uuid, String> = positions
        .iter()
        .map(|(tp, p)| (p.followed.topic_id, tp.topic.clone()))
        .collect();
    let mut ops = Vec::new();
    for topic in response.responses {
        let Some(name) = names.get(&topic.topic_id) else {
            tracing::debug!(leader, topic_id = %topic.topic_id, "answer for a topic not fetched");
            continue;
        };
        for data in topic.partitions {
            let tp = TopicPartition {
                topic: name.clone(),
                partition: data.partition_index,
            };
            let Some(position) = positions.get(&tp).copied() else {
                continue;
            };
            if data.error_code == ResponseError::OffsetOutOfRange.code() {
                out_of_range.push((tp, position));
                continue;
            }
            if data.error_code != 0 {
                tracing::debug!(%tp, leader, error_code = data.error_code, "replica fetch partition error");
                positions.remove(&tp);
                delays.delay(tp, position.followed, Instant::now());
                continue;
            }
            let op = follower_op(&tp, leader, &position, data);
            ops.push((tp, position, op));
        }
    }
    let (answered, calls): (Vec<_>, Vec<_>) = ops
        .into_iter()
        .map(|(tp, position, op)| ((tp.clone(), position), call_replica(shard, tp, op)))
        .unzip();
    let replies = futures_util::future::join_all(calls).await;
    for ((tp, position), reply) in answered.into_iter().zip(replies) {
        take_reply(leader, positions, delays, tp, position, reply);
    }
    out_of_range
}

/// What the owning shard does with a partition's fetched `data`: truncate to a diverging
/// epoch, or append the records as the follower.
fn follower_op(
    tp: &TopicPartition,
    leader: i32,
    position: &Position,
    data: PartitionData,
) -> PartitionOp {
    if data.diverging_epoch.epoch >= 0 {
        tracing::info!(%tp, leader, epoch = data.diverging_epoch.epoch,
            end_offset = data.diverging_epoch.end_offset, "diverging epoch: truncating");
        PartitionOp::TruncateToDivergingEpoch {
            fetched_at: position.followed.leader_epoch,
            epoch: LeaderEpoch(data.diverging_epoch.epoch),
            end_offset: Offset(data.diverging_epoch.end_offset),
        }
    } else {
        PartitionOp::AppendAsFollower {
            fetched_at: position.followed.leader_epoch,
            records: data.records.unwrap_or_default(),
            leader_high_watermark: Offset(data.high_watermark),
            leader_log_start_offset: Offset(data.log_start_offset),
        }
    }
}

/// Takes the owning shard's `reply` to a fetched partition: its next position, or (the append
/// failed) no position and a delay.
fn take_reply(
    leader: i32,
    positions: &mut HashMap<TopicPartition, Position>,
    delays: &mut Delays,
    tp: TopicPartition,
    position: Position,
    reply: PartitionReply,
) {
    match reply {
        PartitionReply::FollowerPosition {
            fetch_offset,
            last_fetched_epoch,
            log_start_offset,
        } => {
            delays.clear(&tp);
            positions.insert(
                tp,
                Position {
                    fetch_offset,
                    last_fetched_epoch,
                    log_start_offset,
                    followed: position.followed,
                },
            );
        }
        other => {
            tracing::warn!(%tp, leader, reply = ?other, "follower append failed");
            positions.remove(&tp);
            delays.delay(tp, position.followed, Instant::now());
        }
    }
}

/// Kafka's `AbstractFetcherThread.fetchOffsetAndTruncate` for `tp`, whose fetch at
/// `position` the leader answered OFFSET_OUT_OF_RANGE: asks the leader its log end offset
/// and its log start offset (ListOffsets latest and earliest with this broker's replica id,
/// as Kafka's `ReplicaFetcherThread` asks, over the fetcher's connection, correlation ids
/// `correlation_id` and the next), then has the owning shard truncate the follower as they
/// say (`PartitionOp::HandleOutOfRange`: to the leader's end when that is below the
/// follower's, fully to start at the leader's log start when that is above the follower's
/// end). Returns the position the next fetch starts from. Errors: the exchanges', a refusal
/// of ListOffsets, [`FetcherError::Truncation`] when the owning shard fails.
async fn reset_out_of_range(
    shard: &Rc<Shard>,
    leader: i32,
    connection: &mut Option<PeerStream>,
    correlation_id: i32,
    tp: &TopicPartition,
    position: Position,
) -> Result<Position, FetcherError> {
    let epoch = position.followed.leader_epoch;
    let leader_log_end_offset = list_leader_offset(
        shard,
        leader,
        connection,
        correlation_id,
        tp,
        epoch,
        LATEST_TIMESTAMP,
    )
    .await?;
    let leader_log_start_offset = list_leader_offset(
        shard,
        leader,
        connection,
        correlation_id.wrapping_add(1),
        tp,
        epoch,
        EARLIEST_TIMESTAMP,
    )
    .await?;
    tracing::info!(%tp, leader, fetch_offset = %position.fetch_offset,
        %leader_log_start_offset, %leader_log_end_offset,
        "fetch offset out of the leader's range");
    let op = PartitionOp::HandleOutOfRange {
        fetched_at: epoch,
        leader_log_start_offset,
        leader_log_end_offset,
    };
    match call_replica(shard, tp.clone(), op).await {
        PartitionReply::FollowerPosition {
            fetch_offset,
            last_fetched_epoch,
            log_start_offset,
        } => Ok(Position {
            fetch_offset,
            last_fetched_epoch,
            log_start_offset,
            followed: position.followed,
        }),
        other => Err(FetcherError::Truncation {
            reply: format!("{other:?}"),
        }),
    }
}

/// The `max_wait_ms` of the next fetch: [`REPLICA_FETCH_WAIT_MAX_MS`], or less when a
/// partition in back-off is due sooner (`next_due`), so that it joins the fetches when its
/// back-off ends rather than when the leader answers a fetch of the others. Kafka's fetcher
/// always waits the full `replica.fetch.wait.max.ms`; measured here (issue #30 point 1), a
/// partition whose new leader had not yet applied its leadership (UNKNOWN_LEADER_EPOCH, a few
/// ms) was left out of a 500 ms fetch parked on partitions with nothing new, and every
/// `acks=all` produce of it waited that long.
fn fetch_wait_ms(next_due: Option<Duration>) -> i32 {
    next_due.map_or(REPLICA_FETCH_WAIT_MAX_MS, |due| {
        i32::try_from(due.as_millis().saturating_add(1))
            .unwrap_or(REPLICA_FETCH_WAIT_MAX_MS)
            .min(REPLICA_FETCH_WAIT_MAX_MS)
    })
}

/// One Fetch exchange of `fetch` with `leader` over `connection` (opened first when `None`),
/// the leader parking it up to `max_wait_ms`, bounded by [`REPLICA_SOCKET_TIMEOUT`].
async fn fetch_once(
    shard: &Shard,
    leader: i32,
    connection: &mut Option<PeerStream>,
    fetch: &SessionFetch,
    max_wait_ms: i32,
    correlation_id: i32,
) -> Result<FetchResponse, FetcherError> {
    let node = shard.config.node_id;
    // KIP-903: this broker's epoch as the image registers it (-1 before its registration).
    let broker_epoch = shard.metadata().registered_broker_epoch(node).unwrap_or(-1);
    let frame = encode_fetch(node, broker_epoch, fetch, max_wait_ms, correlation_id)?;
    let body = round_trip(shard, leader, connection, &frame).await?;
    decode_fetch(leader, body, correlation_id)
}

/// The leader's offset of `tp` for ListOffsets `timestamp` ([`LATEST_TIMESTAMP`]: its log
/// end offset, [`EARLIEST_TIMESTAMP`]: its log start offset), asked with this broker's
/// replica id and `leader_epoch` as the current leader epoch over `connection`. Errors: the
/// exchange's, [`FetcherError::Refused`] for the partition's error code, and
/// [`FetcherError::Decode`] for an answer without the partition or with a negative offset.
async fn list_leader_offset(
    shard: &Shard,
    leader: i32,
    connection: &mut Option<PeerStream>,
    correlation_id: i32,
    tp: &TopicPartition,
    leader_epoch: LeaderEpoch,
    timestamp: i64,
) -> Result<Offset, FetcherError> {
    let frame = encode_list_offsets(
        shard.config.node_id,
        tp,
        leader_epoch,
        timestamp,
        correlation_id,
    )?;
    let body = round_trip(shard, leader, connection, &frame).await?;
    let response = decode_list_offsets(leader, body, correlation_id)?;
    listed_offset(leader, &response, tp)
}

/// `tp`'s offset in a ListOffsets `response` from `leader` (see [`list_leader_offset`]).
pub fn listed_offset(
    leader: i32,
    response: &ListOffsetsResponse,
    tp: &TopicPartition,
) -> Result<Offset, FetcherError> {
    let api = "ListOffsets";
    let partition = response
        .topics
        .iter()
        .filter(|t| t.name.0.as_str() == tp.topic)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index == tp.partition)
        .ok_or_else(|| FetcherError::Decode {
            leader,
            api,
            reason: format!("no answer for {tp}"),
        })?;
    if partition.error_code != 0 {
        return Err(FetcherError::Refused {
            leader,
            api,
            error_code: partition.error_code,
        });
    }
    if partition.offset < 0 {
        return Err(FetcherError::Decode {
            leader,
            api,
            reason: format!("offset {} for {tp}", partition.offset),
        });
    }
    Ok(Offset(partition.offset))
}

/// One request–response exchange of `frame` (size-prefixed) with `leader` over `connection`
/// (opened first when `None`), bounded by [`REPLICA_SOCKET_TIMEOUT`]; returns the response
/// frame without its size prefix.
pub(crate) async fn round_trip(
    shard: &Shard,
    leader: i32,
    connection: &mut Option<PeerStream>,
    frame: &[u8],
) -> Result<Bytes, FetcherError> {
    let exchange = async {
        if connection.is_none() {
            *connection = Some(connect(shard, leader).await?);
        }
        let Some(stream) = connection.as_mut() else {
            return Err(FetcherError::UnknownEndpoint { leader });
        };
        let io = |source| FetcherError::Io { leader, source };
        stream.write_all(frame).await.map_err(io)?;
        // A TLS stream holds what it encrypted until flushed (a plaintext one has nothing to
        // flush).
        stream.flush().await.map_err(io)?;
        let mut size = [0u8; 4];
        stream.read_exact(&mut size).await.map_err(io)?;
        let size_bytes = usize::try_from(u32::from_be_bytes(size)).unwrap_or(usize::MAX);
        if size_bytes > RESPONSE_FRAME_BYTES_MAX {
            return Err(FetcherError::FrameTooLarge { leader, size_bytes });
        }
        let mut body = vec![0u8; size_bytes];
        stream.read_exact(&mut body).await.map_err(io)?;
        Ok(Bytes::from(body))
    };
    let timeout = async {
        crate::rt::sleep(REPLICA_SOCKET_TIMEOUT).await;
        Err(FetcherError::TimedOut {
            leader,
            timeout: REPLICA_SOCKET_TIMEOUT,
        })
    };
    futures_lite::future::or(exchange, timeout).await
}

/// A connection to `leader`'s inter-broker listener (`inter.broker.listener.name`) as the
/// metadata registers it (a host name is resolved on the blocking pool, never on the shard),
/// secured as that listener asks (TLS, SASL: `crate::peer`).
async fn connect(shard: &Shard, leader: i32) -> Result<PeerStream, FetcherError> {
    let listener = shard.config.inter_broker_listener_name();
    let (host, port) = broker_endpoint(&shard.metadata(), leader, &listener)
        .ok_or(FetcherError::UnknownEndpoint { leader })?;
    let addr = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => Some(SocketAddr::new(ip, port)),
        Err(_) => {
            let lookup = (host.clone(), port);
            crate::rt::spawn_blocking(move || {
                use std::net::ToSocketAddrs;
                lookup.to_socket_addrs().ok()?.next()
            })
            .await
        }
    };
    let addr = addr.ok_or_else(|| FetcherError::Unresolved {
        leader,
        host: host.clone(),
        port,
    })?;
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| FetcherError::Io {
            leader,
            source: e.into(),
        })?;
    let _ = stream.set_nodelay(true);
    shard
        .inter_broker
        .secure(&host, stream)
        .await
        .map_err(|source| FetcherError::Peer { leader, source })
}

/// Each partition of `positions` with its Fetch parameters.
fn wanted(positions: &HashMap<TopicPartition, Position>) -> Wanted {
    positions
        .iter()
        .map(|(tp, position)| {
            let partition = FetchPartition::default()
                .with_partition(tp.partition)
                .with_current_leader_epoch(position.followed.leader_epoch.0)
                .with_fetch_offset(position.fetch_offset.0)
                .with_last_fetched_epoch(position.last_fetched_epoch.map_or(-1, |e| e.0))
                .with_log_start_offset(position.log_start_offset.0)
                .with_partition_max_bytes(REPLICA_FETCH_MAX_BYTES);
            (tp.clone(), (position.followed.topic_id, partition))
        })
        .collect()
}

/// The size-prefixed FetchRequest v16 frame of `replica` at `broker_epoch` (-1: unknown) for
/// `fetch`, its session's next fetch (KIP-227, [`FetcherSession`]), parked up to
/// `max_wait_ms`.
fn encode_fetch(
    replica: i32,
    broker_epoch: i64,
    fetch: &SessionFetch,
    max_wait_ms: i32,
    correlation_id: i32,
) -> Result<Bytes, FetcherError> {
    let request = FetchRequest::default()
        .with_replica_state(
            ReplicaState::default()
                .with_replica_id(BrokerId(replica))
                .with_replica_epoch(broker_epoch),
        )
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(REPLICA_FETCH_MIN_BYTES)
        .with_max_bytes(REPLICA_FETCH_RESPONSE_MAX_BYTES)
        .with_isolation_level(0)
        .with_session_id(fetch.session_id)
        .with_session_epoch(fetch.epoch)
        .with_topics(fetch.topics.clone())
        .with_forgotten_topics_data(fetch.forgotten.clone());
    frame(
        ApiKey::Fetch,
        "Fetch",
        FETCH_VERSION,
        correlation_id,
        &request,
    )
}

/// The size-prefixed frame of `request`: a request header (`api_key` at `version`,
/// `correlation_id`, this fetcher's client id), then the request. Errors:
/// [`FetcherError::Encode`] (naming the request `api`) when the codec refuses it or it
/// exceeds 4 GiB.
pub(crate) fn frame<R: Encodable>(
    api_key: ApiKey,
    api: &'static str,
    version: i16,
    correlation_id: i32,
    request: &R,
) -> Result<Bytes, FetcherError> {
    crate::peer::frame_request(CLIENT_ID, api_key, version, correlation_id, request)
        .map_err(|reason| FetcherError::Encode { api, reason })
}

/// The size-prefixed ListOffsets v7 frame of `replica` for `tp` at `timestamp`, with
/// `leader_epoch` as the current leader epoch (KIP-320: a stale leader answers
/// FENCED_LEADER_EPOCH).
fn encode_list_offsets(
    replica: i32,
    tp: &TopicPartition,
    leader_epoch: LeaderEpoch,
    timestamp: i64,
    correlation_id: i32,
) -> Result<Bytes, FetcherError> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(replica))
        .with_isolation_level(0)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(tp.partition)
                .with_current_leader_epoch(leader_epoch.0)
                .with_timestamp(timestamp)])]);
    frame(
        ApiKey::ListOffsets,
        "ListOffsets",
        LIST_OFFSETS_VERSION,
        correlation_id,
        &request,
    )
}

/// The ListOffsetsResponse v7 in `body` answering `correlation_id`. Errors: it does not
/// decode or answers another request.
pub fn decode_list_offsets(
    leader: i32,
    body: Bytes,
    correlation_id: i32,
) -> Result<ListOffsetsResponse, FetcherError> {
    unframe(
        leader,
        ApiKey::ListOffsets,
        "ListOffsets",
        LIST_OFFSETS_VERSION,
        body,
        correlation_id,
    )
}

/// The FetchResponse v16 in `body` (a frame without its size prefix) answering
/// `correlation_id`. Errors: it does not decode, answers another request, or carries a
/// top-level error.
pub fn decode_fetch(
    leader: i32,
    body: Bytes,
    correlation_id: i32,
) -> Result<FetchResponse, FetcherError> {
    let response: FetchResponse = unframe(
        leader,
        ApiKey::Fetch,
        "Fetch",
        FETCH_VERSION,
        body,
        correlation_id,
    )?;
    if response.error_code != 0 {
        return Err(FetcherError::Refused {
            leader,
            api: "Fetch",
            error_code: response.error_code,
        });
    }
    Ok(response)
}

/// The `api_key` response at `version` in `body` (a frame without its size prefix) from
/// `leader`, answering `correlation_id`: the inverse of [`frame`]. Errors:
/// [`FetcherError::Decode`] (naming `api`) when it does not decode or bytes follow it,
/// [`FetcherError::CorrelationMismatch`] when it answers another request.
pub(crate) fn unframe<R: Decodable>(
    leader: i32,
    api_key: ApiKey,
    api: &'static str,
    version: i16,
    mut body: Bytes,
    correlation_id: i32,
) -> Result<R, FetcherError> {
    let decode_error = |e: anyhow::Error| FetcherError::Decode {
        leader,
        api,
        reason: e.to_string(),
    };
    let header = ResponseHeader::decode(&mut body, api_key.response_header_version(version))
        .map_err(decode_error)?;
    if header.correlation_id != correlation_id {
        return Err(FetcherError::CorrelationMismatch {
            leader,
            expected: correlation_id,
            got: header.correlation_id,
        });
    }
    let response = R::decode(&mut body, version).map_err(decode_error)?;
    if body.has_remaining() {
        return Err(FetcherError::Decode {
            leader,
            api,
            reason: format!("{} bytes after the response", body.remaining()),
        });
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use net::kafka_protocol::messages::fetch_response::{
        EpochEndOffset, FetchableTopicResponse, PartitionData,
    };
    use net::kafka_protocol::messages::RequestHeader;

    fn topic_id(topic: &str) -> Uuid {
        Uuid::from_u128(u128::from(topic.as_bytes()[0]))
    }

    fn position(topic: &str, offset: i64, epoch: Option<i32>, leader_epoch: i32) -> Position {
        Position {
            fetch_offset: Offset(offset),
            last_fetched_epoch: epoch.map(LeaderEpoch),
            log_start_offset: Offset(offset / 2),
            followed: Followed {
                leader_epoch: LeaderEpoch(leader_epoch),
                topic_id: topic_id(topic),
            },
        }
    }

    #[test]
    fn a_failing_partition_backs_off_doubling_alone_and_is_cleared_by_a_success() {
        let tp = |partition| TopicPartition {
            topic: "t".into(),
            partition,
        };
        let at = Followed {
            leader_epoch: LeaderEpoch(3),
            topic_id: Uuid::from_u128(7),
        };
        let start = Instant::now();
        let mut delays = Delays::default();
        assert_eq!(delays.next_due(start), None);
        delays.delay(tp(0), at, start);
        assert!(delays.is_delayed(&tp(0), start));
        assert!(!delays.is_delayed(&tp(1), start), "the others are fetched");
        assert!(!delays.is_delayed(&tp(0), start + BACKOFF_MIN));
        let mut backoffs = Vec::new();
        for _ in 0..8 {
            delays.delay(tp(0), at, start);
            backoffs.push(delays.next_due(start).unwrap());
        }
        assert_eq!(backoffs[0], BACKOFF_MIN * 2);
        assert!(backoffs
            .windows(2)
            .all(|w| w[1] == (w[0] * 2).min(BACKOFF_MAX)));
        assert_eq!(*backoffs.last().unwrap(), BACKOFF_MAX);
        delays.clear(&tp(0));
        delays.delay(tp(0), at, start);
        assert_eq!(delays.next_due(start), Some(BACKOFF_MIN));
    }

    #[test]
    fn a_partition_in_back_off_bounds_the_fetch_wait_to_its_due_time() {
        assert_eq!(fetch_wait_ms(None), REPLICA_FETCH_WAIT_MAX_MS);
        assert_eq!(fetch_wait_ms(Some(BACKOFF_MIN)), 51);
        assert_eq!(fetch_wait_ms(Some(Duration::ZERO)), 1);
        assert_eq!(fetch_wait_ms(Some(BACKOFF_MAX)), REPLICA_FETCH_WAIT_MAX_MS);
        let mut delays = Delays::default();
        let start = Instant::now();
        delays.delay(
            TopicPartition {
                topic: "t".into(),
                partition: 0,
            },
            Followed {
                leader_epoch: LeaderEpoch(1),
                topic_id: topic_id("t"),
            },
            start,
        );
        assert_eq!(fetch_wait_ms(delays.next_due(start)), 51);
    }

    #[test]
    fn a_new_leader_epoch_ends_a_back_off_and_the_next_error_starts_it_again() {
        let tp = TopicPartition {
            topic: "t".into(),
            partition: 0,
        };
        let old = Followed {
            leader_epoch: LeaderEpoch(3),
            topic_id: Uuid::from_u128(7),
        };
        let new = Followed {
            leader_epoch: LeaderEpoch(4),
            ..old
        };
        let start = Instant::now();
        let mut delays = Delays::default();
        for _ in 0..5 {
            delays.delay(tp.clone(), old, start);
        }
        assert_eq!(delays.next_due(start), Some(BACKOFF_MIN * 16));
        delays.retain(&HashMap::from([(tp.clone(), old)]));
        assert!(delays.is_delayed(&tp, start), "the same epoch keeps it");
        delays.retain(&HashMap::from([(tp.clone(), new)]));
        assert!(
            !delays.is_delayed(&tp, start),
            "the image's new epoch ended it"
        );
        delays.delay(tp.clone(), old, start);
        delays.delay(tp.clone(), new, start);
        assert_eq!(
            delays.next_due(start),
            Some(BACKOFF_MIN),
            "an error at another epoch starts from the first back-off"
        );
    }

    #[test]
    fn the_request_names_the_replica_and_each_position() {
        let mut positions = HashMap::new();
        let tp = |topic: &str, partition| TopicPartition {
            topic: topic.into(),
            partition,
        };
        positions.insert(tp("a", 0), position("a", 7, Some(2), 3));
        positions.insert(tp("a", 1), position("a", 0, None, 0));
        positions.insert(tp("b", 4), position("b", 42, Some(1), 1));
        let fetch = FetcherSession::default().next_fetch(wanted(&positions));
        let frame = encode_fetch(2, 11, &fetch, REPLICA_FETCH_WAIT_MAX_MS, 9).unwrap();
        let mut body = frame.slice(4..);
        let size = u32::from_be_bytes(frame[..4].try_into().unwrap());
        assert_eq!(usize::try_from(size).unwrap(), body.len());
        let header = RequestHeader::decode(&mut body, 2).unwrap();
        assert_eq!(header.request_api_key, ApiKey::Fetch as i16);
        assert_eq!(header.request_api_version, 16);
        assert_eq!(header.correlation_id, 9);
        let request = FetchRequest::decode(&mut body, 16).unwrap();
        assert!(!body.has_remaining());
        // KIP-903: the replica and its broker epoch in ReplicaState.
        assert_eq!(request.replica_state.replica_id, BrokerId(2));
        assert_eq!(request.replica_state.replica_epoch, 11);
        assert_eq!(request.max_wait_ms, 500);
        assert_eq!(request.min_bytes, 1);
        // KIP-227: the first fetch is full and asks the leader to open a session.
        assert_eq!((request.session_id, request.session_epoch), (0, 0));
        let mut got = Vec::new();
        for topic in &request.topics {
            for p in &topic.partitions {
                got.push((
                    topic.topic_id,
                    p.partition,
                    p.fetch_offset,
                    p.last_fetched_epoch,
                    p.current_leader_epoch,
                    p.log_start_offset,
                ));
            }
        }
        got.sort();
        // Each partition's own log start offset, as Kafka's follower sends it.
        assert_eq!(
            got,
            vec![
                (topic_id("a"), 0, 7, 2, 3, 3),
                (topic_id("a"), 1, 0, -1, 0, 0),
                (topic_id("b"), 4, 42, 1, 1, 21),
            ]
        );
    }

    fn response_frame(correlation_id: i32, response: &FetchResponse) -> Bytes {
        let mut buf = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut buf, 1)
            .unwrap();
        response.encode(&mut buf, 16).unwrap();
        buf.freeze()
    }

    #[test]
    fn responses_decode_and_foreign_or_broken_ones_are_errors() {
        let response =
            FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
                .with_topic_id(topic_id("a"))
                .with_partitions(vec![PartitionData::default()
                    .with_partition_index(1)
                    .with_high_watermark(5)
                    .with_diverging_epoch(
                        EpochEndOffset::default().with_epoch(2).with_end_offset(4),
                    )])]);
        let frame = response_frame(3, &response);
        let decoded = decode_fetch(1, frame.clone(), 3).unwrap();
        assert_eq!(decoded.responses[0].topic_id, topic_id("a"));
        let p = &decoded.responses[0].partitions[0];
        assert_eq!((p.partition_index, p.high_watermark), (1, 5));
        assert_eq!(
            (p.diverging_epoch.epoch, p.diverging_epoch.end_offset),
            (2, 4)
        );
        assert!(matches!(
            decode_fetch(1, frame.clone(), 4),
            Err(FetcherError::CorrelationMismatch { .. })
        ));
        for cut in 0..frame.len() {
            assert!(
                decode_fetch(1, frame.slice(..cut), 3).is_err(),
                "cut at {cut}"
            );
        }
        let refused = response_frame(3, &FetchResponse::default().with_error_code(6));
        assert!(matches!(
            decode_fetch(1, refused, 3),
            Err(FetcherError::Refused { error_code: 6, .. })
        ));
    }

    #[test]
    fn the_out_of_range_list_offsets_names_the_replica_and_its_answer_is_checked() {
        use net::kafka_protocol::messages::list_offsets_response::{
            ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
        };
        let tp = TopicPartition {
            topic: "t".into(),
            partition: 2,
        };
        let frame = encode_list_offsets(3, &tp, LeaderEpoch(5), EARLIEST_TIMESTAMP, 8).unwrap();
        let mut body = frame.slice(4..);
        let header = RequestHeader::decode(
            &mut body,
            ApiKey::ListOffsets.request_header_version(LIST_OFFSETS_VERSION),
        )
        .unwrap();
        assert_eq!(header.request_api_key, ApiKey::ListOffsets as i16);
        assert_eq!(header.correlation_id, 8);
        let request = ListOffsetsRequest::decode(&mut body, LIST_OFFSETS_VERSION).unwrap();
        assert!(!body.has_remaining());
        // Kafka's follower asks with its broker id: the leader answers its log end for latest.
        assert_eq!(request.replica_id, BrokerId(3));
        let p = &request.topics[0].partitions[0];
        assert_eq!(request.topics[0].name.0.as_str(), "t");
        assert_eq!(
            (p.partition_index, p.current_leader_epoch, p.timestamp),
            (2, 5, -2)
        );

        let answer = |error_code: i16, offset: i64| {
            let response = ListOffsetsResponse::default().with_topics(vec![
                ListOffsetsTopicResponse::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_partitions(vec![ListOffsetsPartitionResponse::default()
                        .with_partition_index(2)
                        .with_error_code(error_code)
                        .with_offset(offset)]),
            ]);
            let mut buf = BytesMut::new();
            ResponseHeader::default()
                .with_correlation_id(8)
                .encode(
                    &mut buf,
                    ApiKey::ListOffsets.response_header_version(LIST_OFFSETS_VERSION),
                )
                .unwrap();
            response.encode(&mut buf, LIST_OFFSETS_VERSION).unwrap();
            buf.freeze()
        };
        let decoded = decode_list_offsets(1, answer(0, 40), 8).unwrap();
        assert_eq!(listed_offset(1, &decoded, &tp).unwrap(), Offset(40));
        assert!(matches!(
            decode_list_offsets(1, answer(0, 40), 9),
            Err(FetcherError::CorrelationMismatch { .. })
        ));
        let fenced = decode_list_offsets(1, answer(74, -1), 8).unwrap();
        assert!(matches!(
            listed_offset(1, &fenced, &tp),
            Err(FetcherError::Refused { error_code: 74, .. })
        ));
        let none = decode_list_offsets(1, answer(0, -1), 8).unwrap();
        assert!(matches!(
            listed_offset(1, &none, &tp),
            Err(FetcherError::Decode { .. })
        ));
        let other = TopicPartition {
            topic: "t".into(),
            partition: 0,
        };
        assert!(matches!(
            listed_offset(1, &decoded, &other),
            Err(FetcherError::Decode { .. })
        ));
    }
}
