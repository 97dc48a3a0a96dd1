//! The decoders of the controller quorum's peer bytes on arbitrary input: a voter frame
//! (`replication::raft::codec::decode`, as received from voter 2 by voter 1 of three), the
//! quorum log file (`replication::raft::replay`, as read back after a crash), and a metadata
//! entry and snapshot (`replication::metadata::{decode_entry, decode_snapshot}`, as committed
//! by the leader), and a committed configuration entry (`replication::raft::configuration_entry`,
//! a voter change as a voter applies it). Each must answer `Ok` or a typed error (or `None`),
//! never panic. The first byte picks the decoder.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use replication::raft::codec::decode;
use replication::runtime::NodeId;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let bytes = Bytes::copy_from_slice(rest);
    match which % 5 {
        0 => {
            let _ = decode(1, NodeId(2), &bytes);
        }
        1 => {
            let _ = replication::raft::replay(&bytes);
        }
        2 => {
            let _ = replication::metadata::decode_entry(rest);
        }
        3 => {
            let mut entry = raft::eraftpb::Entry::default();
            entry.set_entry_type(raft::eraftpb::EntryType::EntryConfChangeV2);
            let split = rest.len() / 2;
            entry.data = bytes.slice(..split);
            entry.context = bytes.slice(split..);
            let _ = replication::raft::configuration_entry(&entry);
        }
        _ => {
            let _ = replication::metadata::decode_snapshot(rest);
        }
    }
});
