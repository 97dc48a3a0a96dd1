//! The replica fetcher's decoding of what a leader answers, on arbitrary bytes (a malicious
//! or corrupt leader): `decode_fetch` (a FetchResponse v16 frame without its size prefix, through
//! `unframe`) and `decode_list_offsets` (ListOffsetsResponse v7) with `listed_offset` for each
//! partition it answers. Each must answer `Ok` or a typed error, never panic or abort.
//!
//! Input: byte 0 picks the decoder; the rest is the response frame. The expected correlation
//! id is read from the frame itself, so that most inputs get past the header to the body.
//! Seed the corpus with `broker/fuzz/seeds.py`.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use storage::TopicPartition;

/// The follower's `node.id`-like leader id the errors name (any value).
const LEADER: i32 = 1;

fuzz_target!(|data: &[u8]| {
    let Some((&which, frame)) = data.split_first() else {
        return;
    };
    let correlation_id = frame
        .first_chunk::<4>()
        .map_or(0, |c| i32::from_be_bytes(*c));
    let body = Bytes::copy_from_slice(frame);
    if which % 2 == 0 {
        if let Ok(response) = sluice_broker::decode_fetch(LEADER, body, correlation_id) {
            // What `apply_response` reads of each partition.
            for topic in &response.responses {
                for p in &topic.partitions {
                    let _ = (p.partition_index, p.error_code, p.high_watermark);
                    let _ = p.records.as_ref().map(Bytes::len);
                }
            }
        }
    } else if let Ok(response) = sluice_broker::decode_list_offsets(LEADER, body, correlation_id) {
        for topic in &response.topics {
            for p in &topic.partitions {
                let tp = TopicPartition {
                    topic: topic.name.0.to_string(),
                    partition: p.partition_index,
                };
                let _ = sluice_broker::listed_offset(LEADER, &response, &tp);
            }
        }
    }
});
