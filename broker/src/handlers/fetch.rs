//! Fetch (key 1): one message per requested partition to its owning shard (run in place when
//! this shard owns it), [`PartitionOp::Fetch`], which the owner answers once — when at least
//! `min_bytes` are there, when `max_wait_ms` has passed, or, with whatever is there, when
//! cancelled. Parked fetches are woken by appends, never by polling. Once the answered bytes
//! reach `min_bytes` (or an answer is an error), the partitions still waiting are cancelled and
//! the response is built from the answers. `partition_max_bytes` bounds each partition and
//! `max_bytes` the response, except that the first batch always comes whole (KIP-74). The
//! response is framed by `net::encode_fetch_response`: batch bytes are sent as they sit in the
//! cache or the read buffer, never copied. A partition whose `current_leader_epoch` (v9+,
//! KIP-320) is not the partition's answers FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH alone.
//!
//! Versions (Kafka's `FetchRequest.json`; Kafka 4 serves v4+, KIP-896): batches go out as
//! stored at every version, zstd below v10 too — Kafka 4.4 answers a Fetch v4 of a
//! `compression.type=zstd` topic with its zstd batches and no error (Kafka 3's
//! UNSUPPORTED_COMPRESSION_TYPE went with down-conversion, KIP-724; checked against Kafka 4.4 by
//! tests/compat/test_fetch_produce_versions.py); up to v5 KAFKA_STORAGE_ERROR is answered as
//! NOT_LEADER_OR_FOLLOWER; `log_start_offset` is written from v5, `preferred_read_replica`
//! from v11 (by `net::encode_fetch_response`; -1 unless a leader names one, KIP-392 below).
//!
//! Transactions (KIP-98, v4+): `isolation_level` 1 (read_committed) reads below the partition's
//! last stable offset (LSO) instead of the high watermark, is parked until the LSO (not the
//! HW) moves — a marker appended wakes it — and lists the aborted transactions whose records
//! may be among the batches returned (Kafka's `UnifiedLog.collectAbortedTransactions`: abort
//! marker at or after the fetch offset, first offset below the end of the last batch
//! returned; an empty list when none, `null` for read_uncommitted and for errors, as Kafka's
//! `FetchDataInfo.abortedTransactions`). The client drops the aborted records and the control
//! batches. Every consumer answer's `last_stable_offset` is the LSO, whatever its isolation
//! level, as Kafka's `LogReadResult`; a follower's is the high watermark (followers read
//! everything and ignore it).
//!
//! A consumer's fetch of many partitions, all on this shard (librdkafka, which has no fetch
//! sessions, lists every partition in every fetch) is looked at in place first: only the
//! partitions with something to answer are sent their op, and a fetch with nothing to answer
//! waits on all its partitions at once ([`fetch_scanned`]); the answers are the same.
//!
//! Fetch sessions (KIP-227, v7+; `crate::fetch_sessions`): an incremental fetch is expanded
//! into its session's partitions before anything else and runs as a full one; its response is
//! then pruned to the partitions with something to say. A session error answers the top-level
//! code alone. v13+ name topics by id (KIP-516), resolved against
//! this broker's image; an unknown id answers UNKNOWN_TOPIC_ID for each of its partitions, as
//! Kafka's `KafkaApis.handleFetchRequest` does, and the response carries the requested id.
//! v14 only adds an error this broker never gives (tiered storage, KIP-405). v15+ name the
//! follower by `ReplicaState` (replica id and broker epoch, KIP-903). v16+ add KIP-951's
//! leader hints to NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH answers (the partition's
//! `current_leader` and the response's `node_endpoints`, see `super::leader_hints`).
//!
//! A Fetch with a replica id ≥ 0 is a follower's (Kafka's `FetchParams.isFromFollower`): each
//! partition goes to [`PartitionOp::ReplicaFetch`] on its leader's owning shard, which moves
//! the follower's state in the ISR and answers with records below the leader's
//! written offset, the high watermark, the log start and — v12+ — the diverging epoch
//! (KIP-320); a broker that is not a replica gets `NOT_LEADER_OR_FOLLOWER`, as Kafka's
//! `Partition.followerReplicaOrThrow` answers a Fetch without a current leader epoch; a v15+
//! broker epoch below the one the image registers for the follower gets
//! `NOT_LEADER_OR_FOLLOWER` too, and only a matching one (or none) lets the follower into the
//! ISR (see `replication::check_follower_broker_epoch`). It is parked like a consumer's, woken
//! by the leader's writes rather than by the high watermark.
//!
//! The leader's replication throttle (KIP-73, as Kafka's `ReplicaManager.readFromLog` and
//! `shouldLeaderThrottle`; `crate::replication_quota`): a partition whose topic lists this
//! broker's replica in `leader.replication.throttled.replicas` (`partition:broker` naming the
//! serving broker, as Kafka's `TopicConfigHandler` reads it, or `*`) is throttled for a
//! follower not in its ISR; while this shard's throttled bytes go faster than
//! `leader.replication.throttled.rate / shards`, each throttled partition answers with no
//! records (no error, offsets as usual) and its bytes do not end the wait (Kafka's
//! `DelayedFetch`), so a fetch with nothing else to say waits out `max_wait_ms`; the record
//! bytes sent for throttled partitions are counted into the shard's quota. A topic with no
//! such list costs one config lookup per follower fetch.
//!
//! Fetch from the closest replica (KIP-392, v11+): a consumer's Fetch is served by any replica
//! of the partition, leader or follower, as Kafka's `FetchParams.fetchOnlyLeader` allows once
//! the request carries client metadata (v11+; below, only the leader serves and a follower
//! answers NOT_LEADER_OR_FOLLOWER). A follower reads below the high watermark it learned from
//! its leader — for read_committed below its last stable offset, which its log keeps from the
//! replicated transaction markers — after the same `current_leader_epoch` check
//! (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), and answers OFFSET_OUT_OF_RANGE beyond its
//! log. With `replica.selector.class` set, the leader answers a consumer naming a `rack_id`
//! with `preferred_read_replica` when another in-sync replica holding the fetch offset is in
//! that rack (the most caught-up; `super::read_replica`), at once and with its offsets and no
//! records, as Kafka's `ReplicaManager.readFromLog`; the consumer fetches from that replica
//! next.
//!
//! One corner differs from Kafka: Kafka answers a parked fetch as soon as the bytes summed over
//! its partitions reach `min_bytes`; here a waiting partition answers early only when it alone
//! has `min_bytes`, so a fetch with `min_bytes` > 1 whose new data is spread over several
//! partitions, none holding `min_bytes`, waits out `max_wait_ms`. With `min_bytes` = 1 (the
//! default of librdkafka, kafka-python, aiokafka and the Java client) the two agree.

use super::leader_hints::LeaderHints;
use crate::authz::{self, AclOperation};
use crate::errors::{code, partition_op_error_code};
use crate::fetch_sessions::FetchContext;
use crate::metadata::{ClusterMetadata, Placement};
use crate::metrics::ShardMetrics;
use crate::partitions::{epoch_check, PartitionOp, PartitionOpError, PartitionReply};
use crate::replication_quota;
use crate::response::Response;
use crate::seam::ShardRuntime;
use crate::session::Session;
use crate::shard::Shard;
use futures_channel::oneshot;
use futures_util::StreamExt;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::{ApiKey, FetchRequest};
use net::{
    FetchAbortedTransaction, FetchCurrentLeader, FetchEpochEndOffset, FetchNodeEndpoint,
    FetchPartitionData, FetchResponseData, FetchTopicData,
};
use replication::runtime::{Clock, MonotonicTime, NodeId};
use replication::Isolation;
use std::rc::Rc;
use std::time::Duration;
use storage::{LeaderEpoch, Offset, RecordBatch, TopicPartition};

/// Longest a fetch may be parked, whatever `max_wait_ms` asks (ms).
const FETCH_WAIT_MAX_MS: u64 = 30_000;
/// First Fetch version naming topics by id (KIP-516); an unknown id answers UNKNOWN_TOPIC_ID.
const FIRST_TOPIC_ID_VERSION: i16 = 13;
/// First Fetch version carrying the client's metadata (its `rack_id`): a follower serves it and
/// the leader may answer a preferred read replica (KIP-392).
const FIRST_CLIENT_METADATA_VERSION: i16 = 11;
/// First Fetch version carrying `ReplicaState` (replica id and broker epoch, KIP-903).
const FIRST_REPLICA_STATE_VERSION: i16 = 15;
/// First Fetch version whose NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH answers carry
/// leader hints (KIP-951).
const LEADER_HINTS_VERSION: i16 = 16;
/// Last Fetch version whose clients may not know KAFKA_STORAGE_ERROR: it answers
/// NOT_LEADER_OR_FOLLOWER instead, so they refresh metadata and retry (Kafka's
/// `maybeDownConvertStorageError`).
const LAST_STORAGE_ERROR_DOWN_CONVERTED_VERSION: i16 = 5;
/// Kafka's `isolation_level` for READ_COMMITTED (KIP-98).
const READ_COMMITTED: i8 = 1;

/// Who sent a follower's fetch.
#[derive(Clone, Copy, Debug)]
struct Follower {
    replica: NodeId,
    /// Its broker epoch (v15+, KIP-903); `None`: -1 or an older version.
    broker_epoch: Option<i64>,
    /// The broker epoch the image registers for it while it is not fenced (`None`: not
    /// registered, or fenced), resolved with the request's topics (see [`resolve`]).
    alive_epoch: Option<i64>,
}

struct Wanted {
    tp: TopicPartition,
    /// Where the request's metadata snapshot places the partition (`None`: no such
    /// partition).
    placement: Option<Placement>,
    offset: i64,
    max_bytes: usize,
    /// KIP-320's `current_leader_epoch` (v9+; negative: no check).
    current_leader_epoch: i32,
    /// The follower's `last_fetched_epoch` (v12+; -1 for none).
    last_fetched_epoch: i32,
    /// The replicas of the consumer's rack its leader may point it to (KIP-392, see
    /// `super::read_replica`); empty for none.
    read_replica_candidates: Vec<NodeId>,
    /// Whether the leader throttles this follower's fetch of the partition (KIP-73, see the
    /// module docs); always false for a consumer.
    leader_throttled: bool,
}

/// Serves one Fetch and frames its response. `request_throttle_ms` meters the request's
/// handler time against the client's `request_percentage` once the answer is ready (a
/// consumer's fetch only: followers are exempt).
pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    client_id: &str,
    mut req: FetchRequest,
    version: i16,
    correlation_id: i32,
    request_throttle_ms: impl FnOnce() -> i32,
) -> Response {
    let follower = follower(&req, version);
    let context =
        shard
            .fetch_sessions
            .borrow_mut()
            .begin(&mut req, version, follower.is_some(), now_ms());
    if let FetchContext::Error(error_code) = context {
        return encode(version, correlation_id, &session_error(error_code, 0));
    }
    let wait_ms = u64::try_from(req.max_wait_ms)
        .unwrap_or(0)
        .min(FETCH_WAIT_MAX_MS);
    let deadline = ShardRuntime.now() + Duration::from_millis(wait_ms);
    let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0);
    let max_bytes = usize::try_from(req.max_bytes).unwrap_or(0);
    let (names, wanted, follower) = resolve(shard, session, &req, version, follower);
    let isolation = if req.isolation_level == READ_COMMITTED {
        Isolation::LastStable
    } else {
        Isolation::HighWatermark
    };
    // KIP-392: a consumer's Fetch v11+ carries client metadata, so any replica serves it.
    let any_replica = follower.is_none() && version >= FIRST_CLIENT_METADATA_VERSION;
    let fetching = Fetching {
        follower,
        any_replica,
        min_bytes,
        isolation,
        deadline,
    };
    // KIP-73: which partitions the leader throttles (no allocation when none), and whether
    // they are held back now.
    let throttled: Vec<bool> = if wanted.iter().any(|w| w.leader_throttled) {
        wanted.iter().map(|w| w.leader_throttled).collect()
    } else {
        Vec::new()
    };
    let held_back: &[bool] = if !throttled.is_empty() && leader_throttle_exceeded(shard) {
        &throttled
    } else {
        &[]
    };
    let replies = match fetch_scanned(shard, wanted, &fetching).await {
        Ok(replies) => replies,
        Err(wanted) => fetch_all(shard, wanted, &fetching, held_back).await,
    };
    let read_committed = req.isolation_level == READ_COMMITTED;
    let mut topics = lay_out(&req, &names, replies, max_bytes, version, read_committed);
    if !throttled.is_empty() {
        let bytes = throttled_bytes(&names, &topics, &throttled);
        shard.leader_throttle.borrow_mut().record(bytes, now_ms());
    }
    let session_id =
        match shard
            .fetch_sessions
            .borrow_mut()
            .finish(context, &req.topics, &mut topics, now_ms())
        {
            Ok(id) => id,
            Err(e) => {
                return encode(
                    version,
                    correlation_id,
                    &session_error(e.error_code, e.session_id),
                )
            }
        };
    // The hints are the image's after the wait, looked up only for answers that carry them.
    let node_endpoints = if version >= LEADER_HINTS_VERSION && hinted_answers(&topics) {
        add_leader_hints(&shard.metadata(), &session.listener, &names, &mut topics)
    } else {
        Vec::new()
    };
    let returned = count_response(shard, &topics);
    // A consumer over its `consumer_byte_rate` or `request_percentage` is throttled
    // (`crate::quotas`; the longer throttle answered); followers are not, as Kafka exempts them.
    let throttle_time_ms = if follower.is_none() {
        let bytes = shard.quota_meters.record(
            &shard.metadata.borrow().client_quotas,
            session,
            client_id,
            crate::quotas::Metered::Fetch,
            returned as f64,
        );
        bytes.max(request_throttle_ms())
    } else {
        0
    };
    let response = FetchResponseData {
        throttle_time_ms,
        error_code: 0,
        session_id,
        topics,
        node_endpoints,
    };
    encode(version, correlation_id, &response)
}

/// A fetch session's error (KIP-227): the top-level code, session `session_id`, nothing else.
fn session_error(error_code: i16, session_id: i32) -> FetchResponseData {
    FetchResponseData {
        throttle_time_ms: 0,
        error_code,
        session_id,
        topics: Vec::new(),
        node_endpoints: Vec::new(),
    }
}

/// Whether this shard's throttled follower fetches went faster than its share of
/// `leader.replication.throttled.rate` lately (KIP-73): the rate in effect on this broker —
/// its dynamic value (this broker's, else the cluster default), else the start-up config's —
/// divided by the shard count.
fn leader_throttle_exceeded(shard: &Shard) -> bool {
    let rate = crate::dynamic_config::DynamicBrokerConfigs::of(
        &shard.metadata().broker_configs,
        shard.config.node_id,
    )
    .lookup(replication_quota::LEADER_THROTTLED_RATE)
    .and_then(|(value, _)| value.trim().parse::<u64>().ok())
    .unwrap_or(shard.config.leader_replication_throttled_rate);
    let shards = u64::try_from(shard.shards.max(1)).unwrap_or(1);
    shard
        .leader_throttle
        .borrow()
        .is_exceeded(now_ms(), rate / shards)
}

/// The record bytes `topics` (as laid out, before any session pruning) carries for the
/// partitions `throttled` marks, in the order of the resolved request's partitions (`names`:
/// its topics; an unresolved topic's partitions were never fetched).
fn throttled_bytes(
    names: &[Result<String, i16>],
    topics: &[FetchTopicData],
    throttled: &[bool],
) -> u64 {
    let fetched = topics
        .iter()
        .zip(names)
        .filter(|(_, name)| name.is_ok())
        .flat_map(|(t, _)| &t.partitions);
    let bytes: usize = fetched
        .zip(throttled)
        .filter(|(_, throttled)| **throttled)
        .flat_map(|(p, _)| &p.records)
        .map(|chunk| chunk.len())
        .sum();
    u64::try_from(bytes).unwrap_or(u64::MAX)
}

/// The shard clock in ms, for the fetch sessions' last use and the leader's throttle.
fn now_ms() -> u64 {
    u64::try_from(ShardRuntime.now().0.as_millis()).unwrap_or(u64::MAX)
}

/// `response` framed for `version`; a response the codec refuses closes the connection.
fn encode(version: i16, correlation_id: i32, response: &FetchResponseData) -> Response {
    match net::encode_fetch_response(version, correlation_id, response) {
        Ok(chunks) => Response::Frame(chunks),
        Err(e) => {
            tracing::error!(api = ?ApiKey::Fetch, version, error = %e, "encoding fetch response failed");
            Response::Close
        }
    }
}

/// The response's topics, laid out from the request again (its topic names shared, not
/// copied), each partition filled from its reply in request order within `max_bytes` (the
/// first batch whole, as Kafka).
fn lay_out(
    req: &FetchRequest,
    names: &[Result<String, i16>],
    replies: Vec<Option<PartitionReply>>,
    max_bytes: usize,
    version: i16,
    read_committed: bool,
) -> Vec<FetchTopicData> {
    let mut budget_left = max_bytes;
    let mut first_batch = true;
    let mut replies = replies.into_iter();
    let mut topics = Vec::with_capacity(req.topics.len());
    for (topic, name) in req.topics.iter().zip(names) {
        let mut partitions_out = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            if let Err(error_code) = name {
                // Kafka answers an unresolved id or a denied topic per partition, before any
                // fetch.
                let mut data = empty_partition_data(p.partition);
                data.error_code = *error_code;
                partitions_out.push(data);
                continue;
            }
            let reply = replies
                .next()
                .flatten()
                .unwrap_or(PartitionReply::Error(PartitionOpError::ShardUnavailable));
            let mut data = partition_data(p.partition, reply, &mut budget_left, &mut first_batch);
            if version <= LAST_STORAGE_ERROR_DOWN_CONVERTED_VERSION
                && data.error_code == code(ResponseError::KafkaStorageError)
            {
                data.error_code = code(ResponseError::NotLeaderOrFollower);
            }
            // read_committed gets the list (maybe empty), read_uncommitted none, as Kafka; an
            // answer naming a preferred read replica none (Kafka's `readFromLog` reads nothing).
            if !read_committed || data.error_code != 0 || data.preferred_read_replica >= 0 {
                data.aborted_transactions = None;
            } else if data.aborted_transactions.is_none() {
                data.aborted_transactions = Some(Vec::new());
            }
            partitions_out.push(data);
        }
        topics.push(FetchTopicData {
            topic: topic.topic.clone(),
            topic_id: topic.topic_id,
            partitions: partitions_out,
        });
    }
    topics
}

/// Counts the request and the record bytes it returns in the shard's fetch metrics; returns
/// the bytes.
fn count_response(shard: &Shard, topics: &[FetchTopicData]) -> usize {
    let returned: usize = topics
        .iter()
        .flat_map(|t| &t.partitions)
        .flat_map(|p| &p.records)
        .map(|chunk| chunk.len())
        .sum();
    ShardMetrics::add(&shard.metrics.fetch_requests, 1);
    ShardMetrics::add(
        &shard.metrics.fetch_bytes,
        u64::try_from(returned).unwrap_or(u64::MAX),
    );
    returned
}

/// The request resolved against one metadata snapshot — its one lookup of each topic and of
/// the follower: each topic's name (v13+ names topics by id, KIP-516, resolved as Kafka's
/// `metadataCache.topicIdsToNames`; `None`: an id the image does not know), each partition
/// to fetch with its placement (owner shard, leadership, leader epoch), which the routing and
/// KIP-320's check use as they are, and the follower with the broker epoch the image
/// registers for it while it is not fenced (KIP-903). A topic's `Err` is the code each of its
/// partitions answers: UNKNOWN_TOPIC_ID, or TOPIC_AUTHORIZATION_FAILED when the principal may
/// not READ it — or, for a follower's fetch, may not CLUSTER_ACTION the cluster — as Kafka's
/// `handleFetchRequest` authorizes.
fn resolve(
    shard: &Shard,
    session: &Session,
    req: &FetchRequest,
    version: i16,
    follower: Option<Follower>,
) -> (Vec<Result<String, i16>>, Vec<Wanted>, Option<Follower>) {
    let follower_allowed =
        follower.is_none() || authz::cluster(shard, session, AclOperation::ClusterAction);
    let meta = shard.metadata();
    // KIP-392: the rack of a consumer the leader may point to a replica in its rack.
    let client_rack = req.rack_id.as_str();
    let client_rack = (follower.is_none()
        && version >= FIRST_CLIENT_METADATA_VERSION
        && shard.config.rack_aware_replica_selector
        && !client_rack.is_empty())
    .then_some(client_rack);
    let mut names = Vec::with_capacity(req.topics.len());
    let mut wanted = Vec::new();
    for topic in &req.topics {
        let resolved = if version >= FIRST_TOPIC_ID_VERSION {
            meta.topic_by_id(topic.topic_id)
                .map(|(name, image)| (name.to_owned(), Some(image)))
        } else {
            let name = topic.topic.0.to_string();
            let image = meta.topics.get(&name);
            Some((name, image))
        };
        let Some((name, image)) = resolved else {
            names.push(Err(code(ResponseError::UnknownTopicId)));
            continue;
        };
        let allowed = if follower.is_some() {
            follower_allowed
        } else {
            authz::topic(shard, session, AclOperation::Read, &name)
        };
        if !allowed {
            names.push(Err(code(ResponseError::TopicAuthorizationFailed)));
            continue;
        }
        // KIP-73: one lookup per topic of a follower's fetch.
        let leader_throttled_list = follower.zip(image).and_then(|(f, t)| {
            t.configs
                .get(replication_quota::LEADER_THROTTLED_REPLICAS)
                .map(|list| (list.as_str(), t, f))
        });
        for p in &topic.partitions {
            let leader_throttled = leader_throttled_list.is_some_and(|(list, t, f)| {
                let isr = usize::try_from(p.partition)
                    .ok()
                    .and_then(|i| t.partitions.get(i))
                    .map_or(&[][..], |state| &state.isr[..]);
                replication_quota::is_leader_throttled(
                    list,
                    p.partition,
                    shard.config.node_id,
                    f.replica.0,
                    isr,
                )
            });
            wanted.push(Wanted {
                tp: TopicPartition {
                    topic: name.clone(),
                    partition: p.partition,
                },
                placement: image.and_then(|t| meta.placement(t, p.partition)),
                offset: p.fetch_offset,
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
                current_leader_epoch: p.current_leader_epoch,
                last_fetched_epoch: p.last_fetched_epoch,
                read_replica_candidates: image.zip(client_rack).map_or_else(
                    Vec::new,
                    |(t, rack)| {
                        super::read_replica::read_replica_candidates(&meta, t, p.partition, rack)
                    },
                ),
                leader_throttled,
            });
        }
        names.push(Ok(name));
    }
    let follower = follower.map(|f| Follower {
        alive_epoch: meta
            .image
            .brokers
            .get(&f.replica.0)
            .filter(|b| !b.fenced)
            .map(|b| b.broker_epoch),
        ..f
    });
    (names, wanted, follower)
}

/// The follower a Fetch comes from (Kafka's `FetchRequest.replicaId`/`replicaEpoch`): ≤ v14
/// `replica_id`, v15+ `ReplicaState` (KIP-903) with its broker epoch (`None`: -1); `None` for
/// a consumer (a negative id).
fn follower(req: &FetchRequest, version: i16) -> Option<Follower> {
    let (replica_id, broker_epoch) = if version >= FIRST_REPLICA_STATE_VERSION {
        (
            req.replica_state.replica_id.0,
            req.replica_state.replica_epoch,
        )
    } else {
        (req.replica_id.0, -1)
    };
    (replica_id >= 0).then_some(Follower {
        replica: NodeId(replica_id),
        broker_epoch: (broker_epoch != -1).then_some(broker_epoch),
        alive_epoch: None,
    })
}

/// The error codes whose answers carry KIP-951's hints (Fetch v16+).
fn hinted_codes() -> [i16; 2] {
    [
        code(ResponseError::NotLeaderOrFollower),
        code(ResponseError::FencedLeaderEpoch),
    ]
}

/// Whether some partition is answered with an error that carries hints (only then is the
/// image read for them).
fn hinted_answers(topics: &[FetchTopicData]) -> bool {
    let hinted = hinted_codes();
    topics
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| hinted.contains(&p.error_code))
}

/// KIP-951's hints, as Kafka's `KafkaApis.handleFetchRequest` gives them from v16 (see
/// [`super::leader_hints`]): each partition answered NOT_LEADER_OR_FOLLOWER or
/// FENCED_LEADER_EPOCH gets its current leader and leader epoch; returns the endpoints of
/// those leaders that are alive. `names`: the request's topics as resolved.
fn add_leader_hints(
    meta: &ClusterMetadata,
    listener: &str,
    names: &[Result<String, i16>],
    topics: &mut [FetchTopicData],
) -> Vec<FetchNodeEndpoint> {
    let hinted = hinted_codes();
    let mut hints = LeaderHints::new(meta, listener);
    for (topic, name) in topics.iter_mut().zip(names) {
        let Ok(name) = name else { continue };
        for p in &mut topic.partitions {
            if !hinted.contains(&p.error_code) {
                continue;
            }
            let (leader_id, leader_epoch) = hints.current_leader(name, p.partition_index);
            p.current_leader = Some(FetchCurrentLeader {
                leader_id,
                leader_epoch,
            });
        }
    }
    hints
        .endpoints()
        .into_iter()
        .map(|b| FetchNodeEndpoint {
            node_id: b.id,
            host: b.host,
            port: i32::from(b.port),
            rack: b.rack,
        })
        .collect()
}

fn reply_bytes(reply: &PartitionReply) -> usize {
    match reply {
        PartitionReply::Read { batches, .. } | PartitionReply::ReplicaRead { batches, .. } => {
            batches.iter().map(RecordBatch::len).sum()
        }
        _ => 0,
    }
}

/// Whether `reply` ends the wait of the others: an error, a diverging epoch (the follower
/// must truncate before anything else helps it, as Kafka's `DelayedFetch` completes), or a
/// preferred read replica (Kafka's `fetchMessages` answers at once then too).
fn answers_now(reply: &PartitionReply) -> bool {
    match reply {
        PartitionReply::Read { .. } => false,
        PartitionReply::ReplicaRead {
            diverging_epoch, ..
        } => diverging_epoch.is_some(),
        _ => true,
    }
}

/// How a Fetch's partitions are read ([`fetch_all`]).
struct Fetching {
    /// Who sent a follower's fetch (`None`: a consumer's).
    follower: Option<Follower>,
    /// Whether a follower of a partition may serve this (consumer's) fetch, KIP-392.
    any_replica: bool,
    min_bytes: usize,
    isolation: Isolation,
    deadline: MonotonicTime,
}

/// Sends one [`PartitionOp::Fetch`] per partition — [`PartitionOp::ReplicaFetch`] for a
/// follower's fetch — all at once, on the leader or, when `any_replica`, on this broker's replica
/// whatever its role (KIP-392), and collects the answers in request order
/// (`None`: a partition whose answer never came); once the answered bytes reach `min_bytes`
/// (at least 1) or an answer is an error or a diverging epoch, the partitions still waiting
/// are cancelled and answer with what they have. A partition `held_back` marks (KIP-73, the
/// leader's throttle) answers with no records, and its bytes count for nothing: when no
/// other answer ended the wait, the fetch waits out its deadline, as Kafka's `DelayedFetch`.
async fn fetch_all(
    shard: &Rc<Shard>,
    wanted: Vec<Wanted>,
    fetching: &Fetching,
    held_back: &[bool],
) -> Vec<Option<PartitionReply>> {
    let Fetching {
        follower,
        any_replica,
        min_bytes,
        isolation,
        deadline,
    } = *fetching;
    let n = wanted.len();
    let mut cancels = Vec::with_capacity(n);
    // Every partition's fetch runs concurrently inside this task: no task spawned, and a local
    // partition's answer costs no message.
    let mut fetches = futures_util::stream::FuturesUnordered::new();
    for (i, w) in wanted.into_iter().enumerate() {
        let (cancel_tx, cancel) = oneshot::channel::<()>();
        cancels.push(cancel_tx);
        let op = match follower {
            Some(follower) => PartitionOp::ReplicaFetch {
                replica: follower.replica,
                fetch_offset: Offset(w.offset),
                last_fetched_epoch: (w.last_fetched_epoch >= 0)
                    .then_some(LeaderEpoch(w.last_fetched_epoch)),
                broker_epoch: follower.broker_epoch,
                alive_epoch: follower.alive_epoch,
                max_bytes: w.max_bytes,
                min_bytes,
                deadline,
                cancel,
            },
            None => PartitionOp::Fetch {
                offset: Offset(w.offset),
                read_replica_candidates: w.read_replica_candidates,
                max_bytes: w.max_bytes,
                min_bytes,
                isolation,
                deadline,
                cancel,
            },
        };
        let epoch = replication::fetch_requested_leader_epoch(w.current_leader_epoch);
        fetches.push(async move {
            let reply = if any_replica {
                epoch_check::call_checked_hosted(shard, w.tp, w.placement, epoch, op).await
            } else {
                epoch_check::call_checked_placed(shard, w.tp, w.placement, epoch, op).await
            };
            (i, reply)
        });
    }
    let mut replies: Vec<Option<PartitionReply>> = (0..n).map(|_| None).collect();
    let mut answered_bytes = 0usize;
    let (mut any_held_back, mut ended) = (false, false);
    while let Some((i, mut reply)) = fetches.next().await {
        if held_back.get(i).copied().unwrap_or(false) {
            if let PartitionReply::ReplicaRead { batches, .. } = &mut reply {
                any_held_back |= !batches.is_empty();
                batches.clear();
            }
        }
        answered_bytes += reply_bytes(&reply);
        if answers_now(&reply) || answered_bytes >= min_bytes.max(1) {
            // Dropping the senders cancels the partitions still waiting.
            cancels.clear();
            ended = true;
        }
        if let Some(slot) = replies.get_mut(i) {
            *slot = Some(reply);
        }
    }
    if any_held_back && !ended {
        let left = deadline.saturating_duration_since(ShardRuntime.now());
        crate::rt::sleep(left).await;
    }
    replies
}

/// Fewest partitions a consumer's fetch lists for [`fetch_scanned`] to serve it: below, one
/// parked future per partition ([`fetch_all`]) costs little and wakes only for its own
/// partition.
const SCANNED_MIN_PARTITIONS: usize = 32;

/// A consumer's fetch of [`SCANNED_MIN_PARTITIONS`] or more partitions, with `min_bytes` at
/// most 1 (every client's default), whose partitions are all on this shard and served here with
/// nothing else to decide (this replica may serve them, no preferred read replica to look for,
/// the leader epoch current): each partition is looked at in place
/// ([`replication::Partition::nothing_to_read`]) — no message, no parked future — and only
/// those with something to answer are read, by [`fetch_all`]; the others answer their offsets
/// and no records. When none has anything, the fetch waits for any of their bounds to move
/// (one wake-up registration per partition, on this task) or its deadline, and looks again.
/// Returns `wanted` back (`Err`) when the fetch does not qualify.
///
/// Why (issue #31 point 6): librdkafka has no fetch sessions (KIP-227), so its consumer lists
/// every partition in every fetch; with 1,000 partitions one future, one cancel channel and one
/// parked read per partition per fetch took about 40 % of the shard (4–5 ms a fetch), and the
/// produce requests queued behind it.
async fn fetch_scanned(
    shard: &Rc<Shard>,
    wanted: Vec<Wanted>,
    fetching: &Fetching,
) -> Result<Vec<Option<PartitionReply>>, Vec<Wanted>> {
    let Fetching {
        follower,
        any_replica,
        min_bytes,
        isolation,
        deadline,
    } = *fetching;
    if follower.is_some() || min_bytes > 1 || wanted.len() < SCANNED_MIN_PARTITIONS {
        return Err(wanted);
    }
    let partitions: Option<Vec<Rc<crate::shard::LocalPartition>>> = {
        let owned = shard.partitions.borrow();
        wanted
            .iter()
            .map(|w| {
                let placement = w.placement?;
                let epoch = replication::fetch_requested_leader_epoch(w.current_leader_epoch);
                let served_here = placement.owner == Some(shard.id)
                    && (placement.leads || any_replica)
                    && w.read_replica_candidates.is_empty()
                    && epoch_check::check_placed(Some(placement), epoch).is_ok();
                served_here.then(|| owned.get(&w.tp).cloned()).flatten()
            })
            .collect()
    };
    let Some(partitions) = partitions else {
        return Err(wanted);
    };
    loop {
        let idle: Vec<Option<replication::Read>> = partitions
            .iter()
            .zip(&wanted)
            .map(|(p, w)| p.nothing_to_read(Offset(w.offset), isolation))
            .collect();
        let now = ShardRuntime.now();
        if idle.iter().any(Option::is_none) || now >= deadline {
            return Ok(read_scanned(shard, wanted, idle, fetching).await);
        }
        // No await since the look: every move after it wakes this wait.
        let mut moved: Vec<storage::Notified> =
            partitions.iter().map(|p| p.bound_moved()).collect();
        let any_moved = std::future::poll_fn(|cx| {
            let ready = moved
                .iter_mut()
                .any(|n| std::future::Future::poll(std::pin::Pin::new(n), cx).is_ready());
            if ready {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        });
        let parked = &shard.metrics.parked_fetches;
        parked.set(parked.get() + 1);
        futures_util::future::select(
            std::pin::pin!(any_moved),
            std::pin::pin!(crate::rt::sleep(deadline.saturating_duration_since(now))),
        )
        .await;
        parked.set(parked.get() - 1);
    }
}

/// The replies of a [`fetch_scanned`] fetch: the partitions `idle` has offsets for answer them
/// with no records; the others are read by [`fetch_all`]. In request order.
async fn read_scanned(
    shard: &Rc<Shard>,
    wanted: Vec<Wanted>,
    idle: Vec<Option<replication::Read>>,
    fetching: &Fetching,
) -> Vec<Option<PartitionReply>> {
    let mut replies = Vec::with_capacity(wanted.len());
    let (mut to_read, mut read_at) = (Vec::new(), Vec::new());
    for (i, (w, idle)) in wanted.into_iter().zip(idle).enumerate() {
        match idle {
            Some(read) => replies.push(Some(read.into())),
            None => {
                replies.push(None);
                to_read.push(w);
                read_at.push(i);
            }
        }
    }
    let read = fetch_all(shard, to_read, fetching, &[]).await;
    for (i, reply) in read_at.into_iter().zip(read) {
        replies[i] = reply;
    }
    replies
}

/// A partition's answer with no data yet: no error, offsets -1 (Kafka's
/// `FetchResponse.partitionResponse` defaults).
fn empty_partition_data(partition: i32) -> FetchPartitionData {
    FetchPartitionData {
        partition_index: partition,
        error_code: 0,
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        aborted_transactions: None,
        preferred_read_replica: -1,
        records: Vec::new(),
        diverging_epoch: None,
        current_leader: None,
    }
}

fn partition_data(
    partition: i32,
    reply: PartitionReply,
    budget_left: &mut usize,
    first_batch: &mut bool,
) -> FetchPartitionData {
    let mut data = empty_partition_data(partition);
    match reply {
        PartitionReply::ReplicaRead {
            high_watermark,
            log_start_offset,
            batches,
            diverging_epoch,
        } => {
            data.high_watermark = high_watermark;
            data.last_stable_offset = high_watermark;
            data.log_start_offset = log_start_offset;
            data.diverging_epoch = diverging_epoch.map(|(epoch, end_offset)| FetchEpochEndOffset {
                epoch: epoch.0,
                end_offset: end_offset.0,
            });
            take_batches(&mut data, batches, budget_left, first_batch);
        }
        PartitionReply::Read {
            high_watermark,
            last_stable_offset,
            log_start_offset,
            batches,
            aborted,
        } => {
            data.high_watermark = high_watermark;
            data.last_stable_offset = last_stable_offset;
            data.log_start_offset = log_start_offset;
            let end = take_batches(&mut data, batches, budget_left, first_batch);
            data.aborted_transactions = aborted.map(|aborted| aborted_in(&aborted, end));
        }
        PartitionReply::ReadElsewhere {
            preferred_read_replica,
            high_watermark,
            last_stable_offset,
            log_start_offset,
        } => {
            data.preferred_read_replica = preferred_read_replica;
            data.high_watermark = high_watermark;
            data.last_stable_offset = last_stable_offset;
            data.log_start_offset = log_start_offset;
        }
        PartitionReply::Error(error) => data.error_code = partition_op_error_code(&error),
        other => {
            tracing::error!(?other, "unexpected reply to fetch read");
            data.error_code = code(ResponseError::UnknownServerError);
        }
    }
    data
}

/// The aborted transactions of `aborted` (read with the partition's batches) that may have
/// records among the batches kept within the response's budget, which end at `end`: those
/// whose first offset is below it (Kafka bounds its search by the bytes it returns); none
/// when no batch was kept.
fn aborted_in(
    aborted: &[storage::AbortedTxn],
    end: Option<Offset>,
) -> Vec<FetchAbortedTransaction> {
    let Some(end) = end else {
        return Vec::new();
    };
    aborted
        .iter()
        .filter(|t| t.first_offset < end)
        .map(|t| FetchAbortedTransaction {
            producer_id: t.producer_id,
            first_offset: t.first_offset.0,
        })
        .collect()
}

/// Puts `batches` into `data` within the response's `budget_left` bytes, the response's first
/// batch whole (KIP-74). Batches go out as stored whatever the Fetch version, zstd below v10
/// too, as Kafka 4.4 (see the module docs). Returns the offset after the last batch kept.
fn take_batches(
    data: &mut FetchPartitionData,
    batches: Vec<RecordBatch>,
    budget_left: &mut usize,
    first_batch: &mut bool,
) -> Option<Offset> {
    let mut kept = 0usize;
    for batch in &batches {
        if !*first_batch && batch.len() > *budget_left {
            break;
        }
        *budget_left = budget_left.saturating_sub(batch.len());
        *first_batch = false;
        data.records.extend(batch.chunks().into_iter().cloned());
        kept += 1;
    }
    let last = batches.get(kept.checked_sub(1)?)?;
    Some(last.header().last_offset().plus(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use net::kafka_protocol::messages::fetch_request::ReplicaState;
    use net::kafka_protocol::messages::{BrokerId, TopicName};
    use net::kafka_protocol::protocol::StrBytes;

    #[test]
    fn only_aborted_transactions_starting_below_the_batches_kept_are_listed() {
        let aborted = |producer_id, first| storage::AbortedTxn {
            producer_id,
            first_offset: Offset(first),
        };
        let read = [aborted(1, 4), aborted(2, 9), aborted(3, 12)];
        let listed = aborted_in(&read, Some(Offset(10)));
        let wire = |producer_id, first_offset| FetchAbortedTransaction {
            producer_id,
            first_offset,
        };
        assert_eq!(listed, vec![wire(1, 4), wire(2, 9)]);
        assert!(aborted_in(&read, None).is_empty(), "no batch kept");
    }

    #[test]
    fn the_follower_is_replica_id_before_v15_and_replica_state_from_v15() {
        let old = FetchRequest::default().with_replica_id(BrokerId(2));
        let f = follower(&old, 14).unwrap();
        assert_eq!((f.replica, f.broker_epoch), (NodeId(2), None));
        // v15+ reads ReplicaState only (ReplicaId is not on the wire from v15).
        assert!(follower(&old, 15).is_none());
        let new = FetchRequest::default().with_replica_state(
            ReplicaState::default()
                .with_replica_id(BrokerId(3))
                .with_replica_epoch(42),
        );
        let f = follower(&new, 16).unwrap();
        assert_eq!((f.replica, f.broker_epoch), (NodeId(3), Some(42)));
        assert!(follower(&new, 12).is_none(), "a consumer before v15");
        // Epoch -1: no broker epoch to check.
        let unknown = FetchRequest::default().with_replica_state(
            ReplicaState::default()
                .with_replica_id(BrokerId(3))
                .with_replica_epoch(-1),
        );
        assert_eq!(follower(&unknown, 15).unwrap().broker_epoch, None);
        assert!(
            follower(&FetchRequest::default(), 16).is_none(),
            "a consumer"
        );
    }

    #[test]
    fn a_preferred_read_replica_goes_out_with_the_offsets_and_no_aborted_list() {
        // Partition 0 pointed elsewhere, partition 1 read here (nothing new).
        use net::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
        let req = FetchRequest::default().with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![
                FetchPartition::default().with_partition(0),
                FetchPartition::default().with_partition(1),
            ])]);
        let elsewhere = PartitionReply::ReadElsewhere {
            preferred_read_replica: 2,
            high_watermark: 5,
            last_stable_offset: 5,
            log_start_offset: 0,
        };
        let read = PartitionReply::Read {
            high_watermark: 5,
            last_stable_offset: 5,
            log_start_offset: 0,
            batches: Vec::new(),
            aborted: None,
        };
        let replies = vec![Some(elsewhere), Some(read)];
        let names = [Ok("t".to_string())];
        let topics = lay_out(&req, &names, replies, 1 << 20, 11, true);
        let [elsewhere, read] = &topics[0].partitions[..] else {
            panic!("two partitions: {topics:?}");
        };
        assert_eq!(elsewhere.preferred_read_replica, 2);
        assert_eq!(elsewhere.high_watermark, 5);
        assert_eq!(
            elsewhere.aborted_transactions, None,
            "read_committed, but nothing read"
        );
        assert_eq!(read.preferred_read_replica, -1);
        assert_eq!(read.aborted_transactions, Some(Vec::new()));
    }

    #[test]
    fn only_not_leader_and_fenced_epoch_answers_get_hints() {
        let meta = super::super::leader_hints::tests::metadata();
        let partition = |index, error: ResponseError| {
            let mut data = empty_partition_data(index);
            data.error_code = code(error);
            data
        };
        let mut topics = vec![
            FetchTopicData {
                topic: TopicName(StrBytes::from_static_str("t")),
                topic_id: uuid::Uuid::from_u128(1),
                partitions: vec![
                    partition(0, ResponseError::NotLeaderOrFollower),
                    partition(1, ResponseError::FencedLeaderEpoch),
                    partition(2, ResponseError::UnknownLeaderEpoch),
                ],
            },
            // An unresolved topic id is never hinted.
            FetchTopicData {
                topic: TopicName(StrBytes::from_static_str("")),
                topic_id: uuid::Uuid::from_u128(9),
                partitions: vec![partition(0, ResponseError::NotLeaderOrFollower)],
            },
        ];
        let endpoints =
            add_leader_hints(&meta, "PLAINTEXT", &[Ok("t".into()), Err(100)], &mut topics);
        let hints: Vec<_> = topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.current_leader)
            .collect();
        let leader = |leader_id, leader_epoch| {
            Some(FetchCurrentLeader {
                leader_id,
                leader_epoch,
            })
        };
        assert_eq!(hints, vec![leader(1, 4), leader(1, 5), None, None]);
        assert_eq!(
            endpoints,
            vec![FetchNodeEndpoint {
                node_id: 1,
                host: "127.0.0.1".into(),
                port: 9001,
                rack: None,
            }]
        );
    }
}
