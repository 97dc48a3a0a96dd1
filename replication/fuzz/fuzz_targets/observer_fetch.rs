//! What an observer (`process.roles=broker`) does with a peer's answer to its metadata fetch:
//! the JSON of a `MetadataFetch` (`serde_json`, as `broker/src/controller/forward.rs` reads
//! it), then `MetadataStateMachine::apply_fetched` on an observer that already applied a few
//! entries. Any bytes: a decode error, an apply error, or an image; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use replication::metadata::{MetadataFetch, MetadataImage, MetadataStateMachine};
use replication::raft::RaftTerm;
use replication::runtime::NodeId;

fuzz_target!(|data: &[u8]| {
    let Ok(fetch) = serde_json::from_slice::<MetadataFetch>(data) else {
        return;
    };
    let (mut machine, _view) = MetadataStateMachine::new(MetadataImage::new(String::new()));
    let _ = machine.apply_fetched(NodeId(fetch.leader), RaftTerm(fetch.term), fetch.batch);
});
