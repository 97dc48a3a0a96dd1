//! Incremental fetch sessions (KIP-227), the broker's side, free of I/O: a consumer or
//! follower that fetches many partitions opens a session with a full fetch (epoch 0) and then
//! sends only what changed — partitions added or with a new fetch offset, partitions to forget
//! — and gets back only the partitions with something to say: records, a new high watermark or
//! log start offset, an error, a diverging epoch, a preferred read replica. An idle partition
//! then costs nothing on the wire per fetch.
//!
//! As Kafka's `FetchManager.newContext` and `FetchContext`s:
//! - epoch -1 (`FINAL_EPOCH`): a fetch without a session, answered in full with session id 0;
//!   a session id given with it is closed.
//! - epoch 0 (`INITIAL_EPOCH`): a full fetch (a session id given with it is closed) that opens
//!   a new session from its partitions if the cache has room; the response names it (0: none).
//! - epoch ≥ 1: the session's next fetch. FETCH_SESSION_ID_NOT_FOUND when it is not in the
//!   cache, INVALID_FETCH_SESSION_EPOCH when the epoch is not the session's, and
//!   FETCH_SESSION_TOPIC_ID_ERROR when the request's version names topics otherwise (by id
//!   from v13, KIP-516) than the one that opened it. A session whose last partition is
//!   forgotten is closed and the fetch answered without one. The epoch after 2³¹−1 is 1.
//! - In an incremental response a partition with records moves to the end of the session, so
//!   that the next fetch serves the others first (Kafka's round robin).
//!
//! Sluice keeps one cache per shard — the shard a connection's requests run on — with its
//! share of `max.incremental.fetch.session.cache.slots` (Kafka's default 1000 per broker).
//! Session ids are unique on the broker (each shard hands out the ids equal to its index
//! modulo the shard count), so an id reaching another shard answers
//! FETCH_SESSION_ID_NOT_FOUND and the client starts a new session. A full cache evicts, as
//! Kafka's `FetchSessionCacheShard.tryEvict`, first the least recently used session unused for
//! [`EVICTION_MS`], else the session that ranks lowest — a consumer's below a follower's, then
//! fewer partitions — if it ranks below the new one; otherwise the new fetch gets no session.

use std::collections::HashMap;

use indexmap::IndexMap;
use net::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use net::kafka_protocol::messages::{FetchRequest, TopicName};
use net::{FetchPartitionData, FetchTopicData};
use uuid::Uuid;

/// The session id of "no session" (Kafka's `FetchMetadata.INVALID_SESSION_ID`).
pub const INVALID_SESSION_ID: i32 = 0;
/// The epoch of a full fetch that opens a session (Kafka's `INITIAL_EPOCH`).
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a fetch without a session (Kafka's `FINAL_EPOCH`).
pub const FINAL_EPOCH: i32 = -1;
/// How long a session must go unused before a new one may evict it (ms; Kafka's
/// `min.incremental.fetch.session.eviction.ms` default, an internal key there).
pub const EVICTION_MS: u64 = 120_000;
/// First Fetch version with sessions (KIP-227).
const FIRST_SESSION_VERSION: i16 = 7;
/// First Fetch version naming topics by id (KIP-516).
const FIRST_TOPIC_ID_VERSION: i16 = 13;
/// FETCH_SESSION_ID_NOT_FOUND.
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
/// INVALID_FETCH_SESSION_EPOCH.
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
/// FETCH_SESSION_TOPIC_ID_ERROR.
const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;

/// What a Fetch asks of the cache (Kafka's `FetchContext`), from [`FetchSessionCache::begin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchContext {
    /// No session: the fetch is answered in full with session id 0.
    Sessionless,
    /// A full fetch that opens a session from its partitions if there is room.
    Full {
        /// A follower's fetch (its session outranks consumers' in eviction).
        privileged: bool,
        /// The request names topics by id (v13+).
        uses_topic_ids: bool,
    },
    /// Session `id`'s next fetch, whose response must find the session at `epoch`.
    Incremental { id: i32, epoch: i32 },
    /// Answered with this top-level error code alone (no partitions, session id 0).
    Error(i16),
}

/// A fetch answered with a session error alone (no partitions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionError {
    /// The top-level error code.
    pub error_code: i16,
    /// The response's session id.
    pub session_id: i32,
}

/// One partition of a session: the request's parameters, replayed into every fetch until the
/// client sends them anew, and what the last response said of it.
#[derive(Debug, Clone)]
struct CachedPartition {
    request: FetchPartition,
    /// The high watermark last answered; -1 after an error, so the partition is answered
    /// again once the error goes.
    high_watermark: i64,
    /// The log start offset last answered.
    log_start_offset: i64,
}

impl CachedPartition {
    fn new(request: FetchPartition) -> CachedPartition {
        CachedPartition {
            request,
            high_watermark: -1,
            log_start_offset: -1,
        }
    }

    /// Whether an incremental response must carry `data` (Kafka's
    /// `CachedPartition.maybeUpdateResponseData`); remembers what it says.
    fn must_answer(&mut self, data: &FetchPartitionData) -> bool {
        let mut answer = !data.records.is_empty()
            || data.preferred_read_replica >= 0
            || data.diverging_epoch.is_some();
        if self.high_watermark != data.high_watermark {
            self.high_watermark = data.high_watermark;
            answer = true;
        }
        if self.log_start_offset != data.log_start_offset {
            self.log_start_offset = data.log_start_offset;
            answer = true;
        }
        if data.error_code != 0 {
            self.high_watermark = -1;
            answer = true;
        }
        answer
    }
}

/// A partition of a session: by name before v13, by id from v13 (the other one empty).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PartitionKey {
    topic: TopicName,
    topic_id: Uuid,
    partition: i32,
}

impl PartitionKey {
    fn of(topic: &FetchTopic, partition: i32) -> PartitionKey {
        PartitionKey {
            topic: topic.topic.clone(),
            topic_id: topic.topic_id,
            partition,
        }
    }
}

#[derive(Debug)]
struct FetchSession {
    /// The epoch the session's next fetch must carry.
    epoch: i32,
    privileged: bool,
    uses_topic_ids: bool,
    last_used_ms: u64,
    /// In fetch order.
    partitions: IndexMap<PartitionKey, CachedPartition>,
}

/// One shard's fetch sessions.
#[derive(Debug)]
pub struct FetchSessionCache {
    /// This shard's index, and the shard count: the ids this cache hands out are ≡ `shard`
    /// modulo `shards`.
    shard: u32,
    shards: u32,
    /// At most this many sessions.
    sessions_max: usize,
    sessions: HashMap<i32, FetchSession>,
}

/// The epoch after `epoch` (Kafka's `FetchMetadata.nextEpoch`).
fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        epoch
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl FetchSessionCache {
    /// The cache of shard `shard` of `shards`, with its share (rounded up) of `slots`, the
    /// broker's `max.incremental.fetch.session.cache.slots`.
    pub fn new(shard: usize, shards: usize, slots: usize) -> FetchSessionCache {
        let shards = shards.max(1);
        assert!(shard < shards, "shard {shard} of {shards}");
        FetchSessionCache {
            shard: u32::try_from(shard).unwrap_or(u32::MAX),
            shards: u32::try_from(shards).unwrap_or(u32::MAX),
            sessions_max: slots.div_ceil(shards),
            sessions: HashMap::new(),
        }
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// What `req` (Fetch `version`, from a follower when `follower`) asks of the cache, at
    /// `now_ms`. For a session's next fetch, `req.topics` becomes the session's whole
    /// partition list, the request's own partitions merged in and its forgotten ones removed,
    /// so that the fetch runs as a full one; [`FetchSessionCache::finish`] then prunes the
    /// response.
    pub fn begin(
        &mut self,
        req: &mut FetchRequest,
        version: i16,
        follower: bool,
        now_ms: u64,
    ) -> FetchContext {
        if version < FIRST_SESSION_VERSION {
            return FetchContext::Sessionless;
        }
        let (id, epoch) = (req.session_id, req.session_epoch);
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if id != INVALID_SESSION_ID {
                self.sessions.remove(&id);
            }
            return if epoch == FINAL_EPOCH {
                FetchContext::Sessionless
            } else {
                FetchContext::Full {
                    privileged: follower,
                    uses_topic_ids: version >= FIRST_TOPIC_ID_VERSION,
                }
            };
        }
        let Some(session) = self.sessions.get_mut(&id) else {
            return FetchContext::Error(FETCH_SESSION_ID_NOT_FOUND);
        };
        if session.epoch != epoch {
            return FetchContext::Error(INVALID_FETCH_SESSION_EPOCH);
        }
        if session.uses_topic_ids != (version >= FIRST_TOPIC_ID_VERSION) {
            return FetchContext::Error(FETCH_SESSION_TOPIC_ID_ERROR);
        }
        for topic in &req.topics {
            for p in &topic.partitions {
                let key = PartitionKey::of(topic, p.partition);
                match session.partitions.get_mut(&key) {
                    Some(cached) => cached.request = p.clone(),
                    None => {
                        session
                            .partitions
                            .insert(key, CachedPartition::new(p.clone()));
                    }
                }
            }
        }
        for forgotten in &req.forgotten_topics_data {
            for &partition in &forgotten.partitions {
                session.partitions.shift_remove(&PartitionKey {
                    topic: forgotten.topic.clone(),
                    topic_id: forgotten.topic_id,
                    partition,
                });
            }
        }
        if session.partitions.is_empty() {
            self.sessions.remove(&id);
            return FetchContext::Sessionless;
        }
        session.last_used_ms = now_ms;
        session.epoch = next_epoch(epoch);
        req.topics = session_topics(&session.partitions);
        FetchContext::Incremental {
            id,
            epoch: session.epoch,
        }
    }

    /// The response's session id for a fetch begun as `context` with `req_topics` (the
    /// request's topics after [`FetchSessionCache::begin`]), answered with `topics` (one to one
    /// with `req_topics`, partitions in the same order), at `now_ms`: a full fetch opens its
    /// session here; an incremental one keeps only the partitions with something to say.
    ///
    /// # Errors
    /// INVALID_FETCH_SESSION_EPOCH with the session's id when another fetch of the session went
    /// by meanwhile (a pipelined duplicate; Kafka answers it so too).
    pub fn finish(
        &mut self,
        context: FetchContext,
        req_topics: &[FetchTopic],
        topics: &mut Vec<FetchTopicData>,
        now_ms: u64,
    ) -> Result<i32, SessionError> {
        match context {
            FetchContext::Sessionless | FetchContext::Error(_) => Ok(INVALID_SESSION_ID),
            FetchContext::Full {
                privileged,
                uses_topic_ids,
            } => {
                let mut partitions = IndexMap::new();
                for (req, resp) in req_topics.iter().zip(topics.iter()) {
                    for (p, data) in req.partitions.iter().zip(&resp.partitions) {
                        let mut cached = CachedPartition::new(p.clone());
                        cached.must_answer(data);
                        partitions.insert(PartitionKey::of(req, p.partition), cached);
                    }
                }
                Ok(self.open(privileged, uses_topic_ids, partitions, now_ms))
            }
            FetchContext::Incremental { id, epoch } => {
                let Some(session) = self.sessions.get_mut(&id) else {
                    // Evicted or closed while the fetch waited: answered in full, without a
                    // session, so the client starts a new one.
                    return Ok(INVALID_SESSION_ID);
                };
                if session.epoch != epoch {
                    return Err(SessionError {
                        error_code: INVALID_FETCH_SESSION_EPOCH,
                        session_id: id,
                    });
                }
                for (req, resp) in req_topics.iter().zip(topics.iter_mut()) {
                    resp.partitions.retain(|data| {
                        let key = PartitionKey::of(req, data.partition_index);
                        let Some(cached) = session.partitions.get_mut(&key) else {
                            return false;
                        };
                        let answer = cached.must_answer(data);
                        if answer && !data.records.is_empty() {
                            // Served: to the back of the line.
                            if let Some(cached) = session.partitions.shift_remove(&key) {
                                session.partitions.insert(key, cached);
                            }
                        }
                        answer
                    });
                }
                topics.retain(|t| !t.partitions.is_empty());
                Ok(id)
            }
        }
    }

    /// A new session of `partitions`, if there is room or a session to evict for it: its id,
    /// else [`INVALID_SESSION_ID`].
    fn open(
        &mut self,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: IndexMap<PartitionKey, CachedPartition>,
        now_ms: u64,
    ) -> i32 {
        if self.sessions.len() >= self.sessions_max
            && !self.evict_for(privileged, partitions.len(), now_ms)
        {
            return INVALID_SESSION_ID;
        }
        let Some(id) = self.new_id() else {
            return INVALID_SESSION_ID;
        };
        self.sessions.insert(
            id,
            FetchSession {
                epoch: next_epoch(INITIAL_EPOCH),
                privileged,
                uses_topic_ids,
                last_used_ms: now_ms,
                partitions,
            },
        );
        debug_assert!(self.sessions.len() <= self.sessions_max);
        id
    }

    /// Makes room for a session of `size` partitions (a follower's when `privileged`):
    /// evicts the least recently used session unused for [`EVICTION_MS`], else the lowest
    /// ranked if it ranks below the new one. Whether one was evicted.
    fn evict_for(&mut self, privileged: bool, size: usize, now_ms: u64) -> bool {
        let stale = self
            .sessions
            .iter()
            .filter(|(_, s)| s.last_used_ms.saturating_add(EVICTION_MS) <= now_ms)
            .min_by_key(|(&id, s)| (s.last_used_ms, id))
            .map(|(&id, _)| id);
        let victim = stale.or_else(|| {
            self.sessions
                .iter()
                .map(|(&id, s)| ((s.privileged, s.partitions.len(), id), id))
                .min()
                .filter(|((p, n, _), _)| (*p, *n) < (privileged, size))
                .map(|(_, id)| id)
        });
        victim.is_some_and(|id| self.sessions.remove(&id).is_some())
    }

    /// An id no session of this broker has: positive, ≡ this shard's index modulo the shard
    /// count. `None` when the OS gives no random bytes or no free id turns up in a few tries.
    fn new_id(&self) -> Option<i32> {
        let per_shard = u32::try_from(i32::MAX).unwrap_or(u32::MAX) / self.shards;
        for _ in 0..8 {
            let mut bytes = [0u8; 4];
            getrandom::getrandom(&mut bytes).ok()?;
            let id = (u32::from_le_bytes(bytes) % per_shard) * self.shards + self.shard;
            let id = i32::try_from(id).ok()?;
            if id != INVALID_SESSION_ID && !self.sessions.contains_key(&id) {
                return Some(id);
            }
        }
        None
    }
}

/// The session's partitions as a request's topics, in session order (a topic appears once per
/// run of its partitions).
fn session_topics(partitions: &IndexMap<PartitionKey, CachedPartition>) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (key, cached) in partitions {
        match topics.last_mut() {
            Some(t) if t.topic == key.topic && t.topic_id == key.topic_id => {
                t.partitions.push(cached.request.clone());
            }
            _ => topics.push(
                FetchTopic::default()
                    .with_topic(key.topic.clone())
                    .with_topic_id(key.topic_id)
                    .with_partitions(vec![cached.request.clone()]),
            ),
        }
    }
    topics
}

#[cfg(test)]
mod fetch_sessions_tests;
