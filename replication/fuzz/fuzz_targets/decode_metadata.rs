//! The metadata snapshot and record-log decoder (`replication::metadata::decode_files`) on
//! arbitrary bytes: it must answer `Ok` or a typed error, never panic. The input is split in
//! two at a position taken from its first two bytes: snapshot file, then log file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((split, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let at = usize::from(u16::from_le_bytes(*split)).min(rest.len());
    let (snapshot, log) = rest.split_at(at);
    let _ = replication::metadata::decode_files(snapshot, log);
});
