//! The stable-toolchain fuzz test: random bytes and random mutations of valid requests must
//! decode to `Ok` or `Err`, never panic or abort (DESIGN.md §4, §7). `cargo fuzz` targets for
//! the same entry points live in `net/fuzz/`.

use bytes::{Bytes, BytesMut};
use net::kafka_protocol::records::RecordBatchDecoder;
use net::{decode_frame, decode_request, FrameStatus};
use proptest::prelude::*;

use crate::common::{all_versions, corpus};

/// One edit applied to a valid request.
#[derive(Debug, Clone)]
enum Mutation {
    /// Overwrite the byte at (index mod len).
    Set(usize, u8),
    /// Flip bits of the byte at (index mod len).
    Xor(usize, u8),
    /// Insert bytes at (index mod len + 1).
    Insert(usize, Vec<u8>),
    /// Remove up to n bytes at (index mod len).
    Remove(usize, usize),
    /// Cut the request at (index mod len + 1).
    Truncate(usize),
    /// Overwrite 4 bytes with a large length-like value (the kind that found the abort).
    BigLength(usize, u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Xor(i, b)),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<usize>(), 1usize..16).prop_map(|(i, n)| Mutation::Remove(i, n)),
        any::<usize>().prop_map(Mutation::Truncate),
        (
            any::<usize>(),
            prop_oneof![
                Just(u32::MAX),
                Just(0x7fff_ffff),
                Just(0x8000_0000),
                any::<u32>()
            ]
        )
            .prop_map(|(i, v)| Mutation::BigLength(i, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let len = bytes.len();
    match mutation {
        Mutation::Set(i, b) => bytes[i % len] = *b,
        Mutation::Xor(i, b) => bytes[i % len] ^= *b,
        Mutation::Insert(i, v) => {
            let at = i % len + 1;
            bytes.splice(at..at, v.iter().copied());
        }
        Mutation::Remove(i, n) => {
            let at = i % len;
            let end = (at + n).min(len);
            bytes.drain(at..end);
        }
        Mutation::Truncate(i) => bytes.truncate(i % len + 1),
        Mutation::BigLength(i, v) => {
            let at = i % len;
            for (k, b) in v.to_be_bytes().iter().enumerate() {
                if let Some(slot) = bytes.get_mut(at + k) {
                    *slot = *b;
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 5_000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_request(Bytes::from(bytes.clone()), &all_versions());
        let mut buf = BytesMut::from(&bytes[..]);
        // Drain every frame the random buffer holds.
        while let Ok(FrameStatus::Frame(frame)) = decode_frame(&mut buf, 1 << 20) {
            let _ = decode_request(frame, &all_versions());
        }
    }

    #[test]
    fn random_header_then_random_body_never_panics(
        api_key in -2i16..95,
        api_version in -1i16..20,
        correlation_id in any::<i32>(),
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut frame = Vec::with_capacity(8 + body.len());
        frame.extend_from_slice(&api_key.to_be_bytes());
        frame.extend_from_slice(&api_version.to_be_bytes());
        frame.extend_from_slice(&correlation_id.to_be_bytes());
        frame.extend_from_slice(&body);
        if let Err(err) = decode_request(Bytes::from(frame), &all_versions()) {
            prop_assert_eq!(err.correlation_id(), Some(correlation_id));
        }
    }

    #[test]
    fn mutated_valid_requests_never_panic(
        index in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..6),
    ) {
        let corpus = corpus();
        let (_, _, frame, _) = &corpus[index % corpus.len()];
        let mut bytes = frame.to_vec();
        for mutation in &mutations {
            apply(&mut bytes, mutation);
        }
        let _ = decode_request(Bytes::from(bytes), &all_versions());
    }

    #[test]
    fn random_record_batches_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        // The patched records decoder (headers, record counts): the broker may use it later.
        let _ = RecordBatchDecoder::decode_all(&mut Bytes::from(bytes));
    }
}
