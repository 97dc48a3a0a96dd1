//! Frame + header + body decoding of arbitrary bytes: must return, never panic or abort.
//!
//! The input is treated as a connection's byte stream: every complete frame it holds is decoded
//! against a table listing every API at every version `kafka-protocol` can decode, so the fuzzer
//! reaches every body decoder. Seed the corpus with `net/tests/vectors/`.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use net::kafka_protocol::messages::ApiKey;
use net::{decode_frame, decode_request, ApiVersionTable, FrameStatus};

fuzz_target!(|data: &[u8]| {
    let mut table = ApiVersionTable::new();
    for api_key in ApiKey::iter() {
        let range = api_key.valid_versions();
        if table.insert(api_key, range.min, range.max).is_err() {
            return;
        }
    }
    // The raw input as one frame body (the shape the abort vector has).
    let _ = decode_request(bytes::Bytes::copy_from_slice(data), &table);
    // The raw input as a byte stream of size-prefixed frames.
    let mut buf = BytesMut::from(data);
    while let Ok(FrameStatus::Frame(frame)) = decode_frame(&mut buf, 1 << 20) {
        let _ = decode_request(frame, &table);
    }
});
