use super::*;
use net::kafka_protocol::messages::fetch_request::ForgottenTopic;
use net::kafka_protocol::protocol::StrBytes;

const V12: i16 = 12;
const V13: i16 = 13;

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

fn partition(index: i32, offset: i64) -> FetchPartition {
    FetchPartition::default()
        .with_partition(index)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20)
}

/// A v12 request of session `id` at `epoch` for `parts` (topic, partition, offset).
fn request(id: i32, epoch: i32, parts: &[(&str, i32, i64)]) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for &(topic, index, offset) in parts {
        match topics.last_mut() {
            Some(t) if t.topic == name(topic) => t.partitions.push(partition(index, offset)),
            _ => topics.push(
                FetchTopic::default()
                    .with_topic(name(topic))
                    .with_partitions(vec![partition(index, offset)]),
            ),
        }
    }
    FetchRequest::default()
        .with_session_id(id)
        .with_session_epoch(epoch)
        .with_topics(topics)
}

fn forget(mut req: FetchRequest, topic: &str, partitions: Vec<i32>) -> FetchRequest {
    req.forgotten_topics_data.push(
        ForgottenTopic::default()
            .with_topic(name(topic))
            .with_partitions(partitions),
    );
    req
}

/// The request's partitions as (topic, partition, offset).
fn wanted(req: &FetchRequest) -> Vec<(String, i32, i64)> {
    req.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic.0.to_string(), p.partition, p.fetch_offset))
        })
        .collect()
}

/// The answer to `req`: every partition at high watermark `hw`, log start 0, with one batch
/// for the partitions in `with_records`.
fn answer(req: &FetchRequest, hw: i64, with_records: &[(&str, i32)]) -> Vec<FetchTopicData> {
    req.topics
        .iter()
        .map(|t| FetchTopicData {
            topic: t.topic.clone(),
            topic_id: t.topic_id,
            partitions: t
                .partitions
                .iter()
                .map(|p| FetchPartitionData {
                    partition_index: p.partition,
                    error_code: 0,
                    high_watermark: hw,
                    last_stable_offset: hw,
                    log_start_offset: 0,
                    aborted_transactions: None,
                    preferred_read_replica: -1,
                    records: if with_records.contains(&(&*t.topic.0, p.partition)) {
                        vec![bytes::Bytes::from_static(b"batch")]
                    } else {
                        Vec::new()
                    },
                    diverging_epoch: None,
                    current_leader: None,
                })
                .collect(),
        })
        .collect()
}

fn answered(topics: &[FetchTopicData]) -> Vec<(String, i32)> {
    topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic.0.to_string(), p.partition_index))
        })
        .collect()
}

/// Opens a session of `parts` on `cache` at high watermark `hw`; its id.
fn open(cache: &mut FetchSessionCache, parts: &[(&str, i32, i64)], hw: i64, now_ms: u64) -> i32 {
    let mut req = request(INVALID_SESSION_ID, INITIAL_EPOCH, parts);
    let context = cache.begin(&mut req, V12, false, now_ms);
    let mut topics = answer(&req, hw, &[]);
    let id = cache
        .finish(context, &req.topics, &mut topics, now_ms)
        .unwrap();
    assert_eq!(
        answered(&topics).len(),
        parts.len(),
        "a full fetch answers everything"
    );
    id
}

fn owned(parts: &[(&str, i32, i64)]) -> Vec<(String, i32, i64)> {
    parts
        .iter()
        .map(|&(t, p, o)| (t.to_owned(), p, o))
        .collect()
}

#[test]
fn a_full_fetch_opens_a_session_whose_id_belongs_to_this_shard() {
    let mut cache = FetchSessionCache::new(2, 3, 1000);
    for _ in 0..50 {
        let id = open(&mut cache, &[("a", 0, 0)], 5, 0);
        assert!(id > 0 && id % 3 == 2, "{id}");
    }
    assert_eq!(cache.len(), 50);
}

#[test]
fn an_incremental_fetch_replays_the_session_and_answers_only_what_changed() {
    let mut cache = FetchSessionCache::new(0, 1, 1000);
    let id = open(
        &mut cache,
        &[("a", 0, 10), ("a", 1, 20), ("b", 0, 30)],
        100,
        0,
    );

    // Nothing sent, nothing changed: every partition fetched at its cached offset, none
    // answered.
    let mut req = request(id, 1, &[]);
    let context = cache.begin(&mut req, V12, false, 1);
    assert_eq!(context, FetchContext::Incremental { id, epoch: 2 });
    assert_eq!(
        wanted(&req),
        owned(&[("a", 0, 10), ("a", 1, 20), ("b", 0, 30)])
    );
    let mut topics = answer(&req, 100, &[]);
    assert_eq!(cache.finish(context, &req.topics, &mut topics, 1), Ok(id));
    assert!(topics.is_empty(), "{topics:?}");

    // a-1 moves on and gets records: it alone is answered, and goes to the back of the line.
    let mut req = request(id, 2, &[("a", 1, 25)]);
    let context = cache.begin(&mut req, V12, false, 2);
    assert_eq!(
        wanted(&req),
        owned(&[("a", 0, 10), ("a", 1, 25), ("b", 0, 30)])
    );
    let mut topics = answer(&req, 100, &[("a", 1)]);
    cache.finish(context, &req.topics, &mut topics, 2).unwrap();
    assert_eq!(answered(&topics), vec![("a".to_owned(), 1)]);

    // The high watermark moves: every partition says so once.
    let mut req = request(id, 3, &[]);
    let context = cache.begin(&mut req, V12, false, 3);
    assert_eq!(
        wanted(&req),
        owned(&[("a", 0, 10), ("b", 0, 30), ("a", 1, 25)])
    );
    let mut topics = answer(&req, 101, &[]);
    cache.finish(context, &req.topics, &mut topics, 3).unwrap();
    assert_eq!(answered(&topics).len(), 3);
    let mut req = request(id, 4, &[]);
    let context = cache.begin(&mut req, V12, false, 4);
    let mut topics = answer(&req, 101, &[]);
    cache.finish(context, &req.topics, &mut topics, 4).unwrap();
    assert!(topics.is_empty());
}

#[test]
fn an_error_is_always_answered_and_the_partition_again_once_it_clears() {
    let mut cache = FetchSessionCache::new(0, 1, 1000);
    let id = open(&mut cache, &[("a", 0, 0)], 7, 0);
    let mut req = request(id, 1, &[]);
    let context = cache.begin(&mut req, V12, false, 1);
    let mut topics = answer(&req, 7, &[]);
    topics[0].partitions[0].error_code = 6; // NOT_LEADER_OR_FOLLOWER
    cache.finish(context, &req.topics, &mut topics, 1).unwrap();
    assert_eq!(answered(&topics).len(), 1);
    // Same high watermark as before the error: answered all the same.
    let mut req = request(id, 2, &[]);
    let context = cache.begin(&mut req, V12, false, 2);
    let mut topics = answer(&req, 7, &[]);
    cache.finish(context, &req.topics, &mut topics, 2).unwrap();
    assert_eq!(answered(&topics).len(), 1);
}

#[test]
fn session_errors_are_kafkas() {
    let mut cache = FetchSessionCache::new(0, 1, 1000);
    let id = open(&mut cache, &[("a", 0, 0)], 0, 0);
    let mut req = request(id + 1, 1, &[]);
    assert_eq!(
        cache.begin(&mut req, V12, false, 1),
        FetchContext::Error(FETCH_SESSION_ID_NOT_FOUND)
    );
    let mut req = request(id, 5, &[]);
    assert_eq!(
        cache.begin(&mut req, V12, false, 1),
        FetchContext::Error(INVALID_FETCH_SESSION_EPOCH)
    );
    let mut req = request(id, 1, &[]);
    assert_eq!(
        cache.begin(&mut req, V13, false, 1),
        FetchContext::Error(FETCH_SESSION_TOPIC_ID_ERROR)
    );
    // The errors left the session as it was.
    let mut req = request(id, 1, &[]);
    assert!(matches!(
        cache.begin(&mut req, V12, false, 1),
        FetchContext::Incremental { .. }
    ));
}

#[test]
fn a_duplicate_that_went_by_meanwhile_makes_the_first_answer_an_epoch_error() {
    let mut cache = FetchSessionCache::new(0, 1, 1000);
    let id = open(&mut cache, &[("a", 0, 0)], 0, 0);
    let mut first = request(id, 1, &[]);
    let first_context = cache.begin(&mut first, V12, false, 1);
    let mut second = request(id, 2, &[]);
    let second_context = cache.begin(&mut second, V12, false, 1);
    let mut topics = answer(&first, 0, &[]);
    assert_eq!(
        cache.finish(first_context, &first.topics, &mut topics, 1),
        Err(SessionError {
            error_code: INVALID_FETCH_SESSION_EPOCH,
            session_id: id
        })
    );
    let mut topics = answer(&second, 0, &[]);
    assert_eq!(
        cache.finish(second_context, &second.topics, &mut topics, 1),
        Ok(id)
    );
}

#[test]
fn forgetting_the_last_partition_or_a_final_or_initial_epoch_closes_the_session() {
    let mut cache = FetchSessionCache::new(0, 1, 1000);
    let id = open(&mut cache, &[("a", 0, 0), ("a", 1, 0)], 0, 0);
    let mut req = forget(request(id, 1, &[]), "a", vec![0]);
    assert!(matches!(
        cache.begin(&mut req, V12, false, 1),
        FetchContext::Incremental { .. }
    ));
    assert_eq!(wanted(&req), owned(&[("a", 1, 0)]));
    let mut req = forget(request(id, 2, &[]), "a", vec![1]);
    assert_eq!(
        cache.begin(&mut req, V12, false, 1),
        FetchContext::Sessionless
    );
    assert!(cache.len() == 0);

    let id = open(&mut cache, &[("a", 0, 0)], 0, 0);
    let mut req = request(id, FINAL_EPOCH, &[("a", 0, 0)]);
    assert_eq!(
        cache.begin(&mut req, V12, false, 1),
        FetchContext::Sessionless
    );
    assert!(cache.len() == 0);

    let id = open(&mut cache, &[("a", 0, 0)], 0, 0);
    let mut req = request(id, INITIAL_EPOCH, &[("a", 0, 0)]);
    assert!(matches!(
        cache.begin(&mut req, V12, false, 1),
        FetchContext::Full { .. }
    ));
    assert!(
        cache.len() == 0,
        "the old session is closed before a new one opens"
    );
}

#[test]
fn versions_before_seven_have_no_sessions() {
    let mut cache = FetchSessionCache::new(0, 1, 1000);
    let mut req = request(INVALID_SESSION_ID, INITIAL_EPOCH, &[("a", 0, 0)]);
    assert_eq!(
        cache.begin(&mut req, 6, false, 0),
        FetchContext::Sessionless
    );
}

#[test]
fn a_full_cache_evicts_a_stale_session_then_a_lower_ranked_one_else_opens_none() {
    let mut cache = FetchSessionCache::new(0, 2, 4); // 2 slots on this shard
    let small = open(&mut cache, &[("a", 0, 0)], 0, 0);
    let big = open(&mut cache, &[("a", 0, 0), ("a", 1, 0), ("a", 2, 0)], 0, 10);
    // Not stale, and no smaller: a one-partition consumer session gets none.
    assert_eq!(open(&mut cache, &[("b", 0, 0)], 0, 20), INVALID_SESSION_ID);
    // A bigger one evicts the smallest.
    let bigger = open(
        &mut cache,
        &[("c", 0, 0), ("c", 1, 0), ("c", 2, 0), ("c", 3, 0)],
        0,
        30,
    );
    assert_ne!(bigger, INVALID_SESSION_ID);
    assert_eq!(cache.len(), 2);
    let mut req = request(small, 1, &[]);
    assert_eq!(
        cache.begin(&mut req, V12, false, 31),
        FetchContext::Error(FETCH_SESSION_ID_NOT_FOUND)
    );
    // Once `big` is stale, anyone may take its place.
    let late = open(&mut cache, &[("d", 0, 0)], 0, 10 + EVICTION_MS);
    assert_ne!(late, INVALID_SESSION_ID);
    let mut req = request(big, 1, &[]);
    assert_eq!(
        cache.begin(&mut req, V12, false, 10 + EVICTION_MS),
        FetchContext::Error(FETCH_SESSION_ID_NOT_FOUND)
    );
}

#[test]
fn no_slots_no_sessions() {
    let mut cache = FetchSessionCache::new(0, 1, 0);
    assert_eq!(open(&mut cache, &[("a", 0, 0)], 0, 0), INVALID_SESSION_ID);
}

#[test]
fn the_epoch_after_the_last_is_one() {
    assert_eq!(next_epoch(i32::MAX), 1);
    assert_eq!(next_epoch(1), 2);
    assert_eq!(next_epoch(FINAL_EPOCH), FINAL_EPOCH);
}
