//! [`FileRaftStorage`]: the durable Raft state as one append-only file of framed, versioned,
//! CRC-32C-checked records in a directory reached through [`DurableDir`] (the broker's
//! implementation does the I/O on its shard; `SimDir` is the simulation's).
//!
//! File `quorum.log`, a sequence of records, each (big-endian):
//!
//! | bytes  | field                                                          |
//! |--------|----------------------------------------------------------------|
//! | 0..4   | magic `SLRL`                                                   |
//! | 4      | version, [`RECORD_VERSION`]                                    |
//! | 5      | kind: 1 entry, 2 hard state, 3 conf state, 4 snapshot          |
//! | 6..10  | payload length in bytes (u32), at most [`RECORD_BYTES_MAX`]    |
//! | 10..14 | CRC-32C of bytes 4..10 followed by the payload                 |
//! | 14..   | payload: the raft-rs protobuf message of that kind             |
//!
//! Replay, in file order: a snapshot record replaces everything before it; an entry record at
//! index `i` drops every entry from `i` on and appends (Raft's overwrite of a conflicting
//! suffix); a hard-state or conf-state record replaces the previous one.
//!
//! Crash argument: [`RaftStorage::persist`] appends its records with one
//! [`DurableDir::append`] (written and fdatasynced before it resolves), so what it acknowledged
//! survives; a crash during the append leaves a torn or zeroed tail, and replay stops at the
//! first record whose magic, version, length or CRC fails — everything before is a prefix of
//! completed appends, and the tail is cut off (the file is rewritten with its valid prefix)
//! before anything is appended after it. A received snapshot and a compaction rewrite the
//! whole file with [`DurableDir::replace`] (write a temporary file, fsync, rename, fsync the
//! directory): the old file or the new one survives, never a mix.

use super::storage::{check_recovered, Persist, RaftStorage, RaftStorageError, Recovered};
use bytes::{BufMut, Bytes, BytesMut};
use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};

/// The file holding the Raft state.
pub const LOG_FILE: &str = "quorum.log";
/// The magic at the start of every record ("Sluice Raft Log").
pub const RECORD_MAGIC: [u8; 4] = *b"SLRL";
/// The record version this module writes and reads.
pub const RECORD_VERSION: u8 = 1;
/// Bytes before a record's payload.
pub const RECORD_HEADER_BYTES: usize = 14;
/// Largest record payload (bytes): a snapshot record with its metadata.
pub const RECORD_BYTES_MAX: usize = super::codec::MESSAGE_BYTES_MAX;

const KIND_ENTRY: u8 = 1;
const KIND_HARD_STATE: u8 = 2;
const KIND_CONF_STATE: u8 = 3;
const KIND_SNAPSHOT: u8 = 4;

const _: () = assert!(RECORD_BYTES_MAX <= u32::MAX as usize);

/// A directory of whole files, each call durable when it resolves.
#[allow(async_fn_in_trait)] // Used generically on one thread: the futures need not be `Send`.
pub trait DurableDir {
    /// The whole file `name`, or `None` when it does not exist. Errors:
    /// [`RaftStorageError::Io`].
    async fn read(&mut self, name: &str) -> Result<Option<Bytes>, RaftStorageError>;
    /// Appends `bytes` to `name` (creating it) and fdatasyncs. Errors:
    /// [`RaftStorageError::Io`]; after an error the file may hold a torn prefix of `bytes`.
    async fn append(&mut self, name: &str, bytes: Bytes) -> Result<(), RaftStorageError>;
    /// Replaces `name` by `bytes` atomically and durably (temporary file, fsync, rename,
    /// directory fsync). Errors: [`RaftStorageError::Io`]; after an error `name` holds the old
    /// or the new contents.
    async fn replace(&mut self, name: &str, bytes: Bytes) -> Result<(), RaftStorageError>;
}

fn put_record(
    out: &mut BytesMut,
    kind: u8,
    message: &dyn protobuf::Message,
) -> Result<(), RaftStorageError> {
    let too_large = |reason: String| RaftStorageError::Io {
        operation: "encoding a record",
        reason,
    };
    let payload = message
        .write_to_bytes()
        .map_err(|e| too_large(e.to_string()))?;
    let length = u32::try_from(payload.len())
        .ok()
        .filter(|_| payload.len() <= RECORD_BYTES_MAX)
        .ok_or_else(|| {
            too_large(format!(
                "{} bytes, more than {RECORD_BYTES_MAX}",
                payload.len()
            ))
        })?;
    let start = out.len();
    out.put_slice(&RECORD_MAGIC);
    out.put_u8(RECORD_VERSION);
    out.put_u8(kind);
    out.put_u32(length);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[start + 4..start + 10]), &payload);
    out.put_u32(crc);
    out.put_slice(&payload);
    Ok(())
}

/// Encodes the records of `step`, in replay order. Errors: [`RaftStorageError::Io`] for a
/// record beyond [`RECORD_BYTES_MAX`].
fn encode_step(step: Persist<'_>) -> Result<BytesMut, RaftStorageError> {
    let mut out = BytesMut::new();
    if let Some(snapshot) = step.snapshot {
        put_record(&mut out, KIND_SNAPSHOT, snapshot)?;
    }
    for entry in step.entries {
        put_record(&mut out, KIND_ENTRY, entry)?;
    }
    if let Some(hard_state) = step.hard_state {
        put_record(&mut out, KIND_HARD_STATE, hard_state)?;
    }
    if let Some(conf_state) = step.conf_state {
        put_record(&mut out, KIND_CONF_STATE, conf_state)?;
    }
    Ok(out)
}

/// The whole state as records: what a rewrite of the file holds. Errors: as
/// [`encode_step`].
fn encode_state(state: &Recovered) -> Result<Bytes, RaftStorageError> {
    let snapshot = (state.snapshot.get_metadata().index > 0).then_some(&state.snapshot);
    let out = encode_step(Persist {
        snapshot,
        entries: &state.entries,
        hard_state: Some(&state.hard_state),
        conf_state: Some(&state.conf_state),
    })?;
    Ok(out.freeze())
}

fn apply_step(state: &mut Recovered, step: Persist<'_>) -> Result<(), RaftStorageError> {
    if let Some(snapshot) = step.snapshot {
        state.snapshot = snapshot.clone();
        state.entries.clear();
        state.conf_state = snapshot.get_metadata().get_conf_state().clone();
    }
    for entry in step.entries {
        let first = state.snapshot.get_metadata().index + 1;
        let last = first + state.entries.len() as u64;
        if entry.index < first || entry.index > last {
            return Err(RaftStorageError::Corrupt {
                reason: format!("entry {} outside {first}..={last} of the log", entry.index),
            });
        }
        let keep = usize::try_from(entry.index - first).unwrap_or(usize::MAX);
        state.entries.truncate(keep);
        state.entries.push(entry.clone());
    }
    if let Some(hard_state) = step.hard_state {
        state.hard_state = hard_state.clone();
    }
    if let Some(conf_state) = step.conf_state {
        state.conf_state = conf_state.clone();
    }
    Ok(())
}

/// Checks that `entries` are contiguous and start inside or right after the log of `state`
/// (so that [`apply_step`] accepts them). Errors: [`RaftStorageError::Corrupt`].
fn check_entries(state: &Recovered, entries: &[Entry]) -> Result<(), RaftStorageError> {
    let Some(first) = entries.first() else {
        return Ok(());
    };
    let log_first = state.snapshot.get_metadata().index + 1;
    let log_next = log_first + state.entries.len() as u64;
    let contiguous = entries
        .iter()
        .zip(first.index..)
        .all(|(entry, index)| entry.index == index);
    if first.index < log_first || first.index > log_next || !contiguous {
        return Err(RaftStorageError::Corrupt {
            reason: format!(
                "entries from {} ({} of them) do not continue the log {log_first}..{log_next}",
                first.index,
                entries.len()
            ),
        });
    }
    Ok(())
}

/// One record read back.
enum Record {
    Entry(Entry),
    HardState(HardState),
    ConfState(ConfState),
    Snapshot(Snapshot),
}

/// The next record at the start of `bytes` and its length, or `None` at the end or at a torn,
/// zeroed or corrupt tail. Never panics.
fn next_record(bytes: &Bytes) -> Option<(Record, usize)> {
    let header = bytes.get(..RECORD_HEADER_BYTES)?;
    if header[..4] != RECORD_MAGIC || header[4] != RECORD_VERSION {
        return None;
    }
    let kind = header[5];
    let length = usize::try_from(u32::from_be_bytes([
        header[6], header[7], header[8], header[9],
    ]))
    .ok()
    .filter(|l| *l <= RECORD_BYTES_MAX)?;
    let stored = u32::from_be_bytes([header[10], header[11], header[12], header[13]]);
    let end = RECORD_HEADER_BYTES.checked_add(length)?;
    let payload = bytes.get(RECORD_HEADER_BYTES..end)?;
    if crc32c::crc32c_append(crc32c::crc32c(&header[4..10]), payload) != stored {
        return None;
    }
    let payload = bytes.slice(RECORD_HEADER_BYTES..end);
    let record = match kind {
        KIND_ENTRY => Record::Entry(Entry::parse_from_carllerche_bytes(&payload).ok()?),
        KIND_HARD_STATE => {
            Record::HardState(HardState::parse_from_carllerche_bytes(&payload).ok()?)
        }
        KIND_CONF_STATE => {
            Record::ConfState(ConfState::parse_from_carllerche_bytes(&payload).ok()?)
        }
        KIND_SNAPSHOT => Record::Snapshot(Snapshot::parse_from_carllerche_bytes(&payload).ok()?),
        _ => return None,
    };
    Some((record, end))
}

/// Replays the records of a file: the state and the length of its valid prefix. Errors:
/// [`RaftStorageError::Corrupt`] when valid records contradict each other (never on a torn
/// tail, which ends the replay).
pub fn replay(file: &Bytes) -> Result<(Recovered, usize), RaftStorageError> {
    let mut state = Recovered::default();
    let mut at = 0;
    while let Some((record, len)) = next_record(&file.slice(at..)) {
        match record {
            Record::Entry(entry) => apply_step(
                &mut state,
                Persist {
                    entries: std::slice::from_ref(&entry),
                    ..Persist::default()
                },
            )?,
            Record::HardState(hard_state) => state.hard_state = hard_state,
            Record::ConfState(conf_state) => state.conf_state = conf_state,
            Record::Snapshot(snapshot) => apply_step(
                &mut state,
                Persist {
                    snapshot: Some(&snapshot),
                    ..Persist::default()
                },
            )?,
        }
        at += len;
    }
    Ok((state, at))
}

/// [`RaftStorage`] as one record file in a [`DurableDir`]. Keeps a copy of the durable state
/// in memory to rewrite the file at a compaction (bounded by the compaction interval).
pub struct FileRaftStorage<D> {
    dir: D,
    /// What the file holds, replayed (set by `recover`).
    state: Recovered,
}

impl<D: DurableDir> FileRaftStorage<D> {
    /// Storage in `dir`; call [`RaftStorage::recover`] first.
    pub fn new(dir: D) -> FileRaftStorage<D> {
        FileRaftStorage {
            dir,
            state: Recovered::default(),
        }
    }
}

impl<D: DurableDir> RaftStorage for FileRaftStorage<D> {
    async fn recover(&mut self) -> Result<Recovered, RaftStorageError> {
        let file = self.dir.read(LOG_FILE).await?.unwrap_or_default();
        let (state, valid_bytes) = replay(&file)?;
        check_recovered(&state)?;
        if valid_bytes < file.len() {
            // A torn tail from a crash mid-append: cut it before anything follows it.
            self.dir
                .replace(LOG_FILE, file.slice(..valid_bytes))
                .await?;
        }
        self.state = state.clone();
        Ok(state)
    }

    async fn persist(&mut self, step: Persist<'_>) -> Result<(), RaftStorageError> {
        if step.snapshot.is_some() {
            // Rare (a follower far behind): the whole file is rewritten from the new state.
            let mut next = self.state.clone();
            apply_step(&mut next, step)?;
            self.dir.replace(LOG_FILE, encode_state(&next)?).await?;
            self.state = next;
        } else {
            check_entries(&self.state, step.entries)?;
            self.dir
                .append(LOG_FILE, encode_step(step)?.freeze())
                .await?;
            // Cannot fail: the entries were checked against this state.
            apply_step(&mut self.state, step)?;
        }
        Ok(())
    }

    async fn compact(&mut self, snapshot: &Snapshot) -> Result<(), RaftStorageError> {
        let mut next = self.state.clone();
        let index = snapshot.get_metadata().index;
        next.entries.retain(|e| e.index > index);
        next.snapshot = snapshot.clone();
        next.conf_state = snapshot.get_metadata().get_conf_state().clone();
        self.dir.replace(LOG_FILE, encode_state(&next)?).await?;
        self.state = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            data: Bytes::from(format!("entry {index}")),
            ..Entry::default()
        }
    }

    fn steps_file() -> (Bytes, Vec<usize>, Recovered) {
        let mut file = BytesMut::new();
        let mut ends = Vec::new();
        let mut model = Recovered::default();
        let conf = ConfState {
            voters: vec![1, 2, 3],
            ..ConfState::default()
        };
        let hs = HardState {
            term: 2,
            vote: 1,
            commit: 2,
            ..HardState::default()
        };
        let first: Vec<Entry> = (1..=4).map(|i| entry(i, 1)).collect();
        let second = [entry(3, 2), entry(4, 2)];
        let steps = [
            Persist {
                conf_state: Some(&conf),
                ..Persist::default()
            },
            Persist {
                entries: &first,
                ..Persist::default()
            },
            Persist {
                entries: &second,
                hard_state: Some(&hs),
                ..Persist::default()
            },
        ];
        for step in steps {
            file.extend_from_slice(&encode_step(step).expect("encodes"));
            ends.push(file.len());
            apply_step(&mut model, step).expect("a valid step");
        }
        (file.freeze(), ends, model)
    }

    #[test]
    fn replay_overwrites_a_conflicting_suffix() {
        let (file, _, model) = steps_file();
        let (state, valid) = replay(&file).expect("replays");
        assert_eq!(valid, file.len());
        assert_eq!(state, model);
        let terms: Vec<u64> = state.entries.iter().map(|e| e.term).collect();
        assert_eq!(terms, [1, 1, 2, 2]);
    }

    #[test]
    fn a_rewritten_state_replays_to_itself() {
        let (_, _, mut model) = steps_file();
        let mut snapshot = Snapshot {
            data: Bytes::from_static(b"state"),
            ..Snapshot::default()
        };
        snapshot.mut_metadata().index = 2;
        snapshot.mut_metadata().term = 1;
        model.entries.retain(|e| e.index > 2);
        model.snapshot = snapshot;
        let (state, _) = replay(&encode_state(&model).expect("encodes")).expect("replays");
        assert_eq!(state, model);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// A file cut anywhere (a torn append) replays to the state after the last whole
        /// step before the cut, or to a state between two steps, never to garbage.
        #[test]
        fn a_torn_file_replays_to_a_prefix(cut in 0usize..2_000) {
            let (file, ends, _) = steps_file();
            let cut = cut % (file.len() + 1);
            let (state, valid) = replay(&file.slice(..cut)).expect("a prefix replays");
            prop_assert!(valid <= cut);
            // The valid prefix ends on a record boundary and replays alone to the same state.
            let (again, _) = replay(&file.slice(..valid)).expect("replays");
            prop_assert_eq!(&again, &state);
            if let Some(last_whole) = ends.iter().rev().find(|e| **e <= cut) {
                prop_assert!(valid >= *last_whole);
            }
        }

        /// Random bytes replay to an error or a state, never a panic.
        #[test]
        fn random_files_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = replay(&Bytes::from(bytes));
        }

        /// A flipped byte ends the replay at the record holding it (or is refused).
        #[test]
        fn a_flipped_byte_ends_the_replay_there(i in 0usize..2_000, bit in 0u8..8) {
            let (file, _, _) = steps_file();
            let i = i % file.len();
            let mut bytes = file.to_vec();
            bytes[i] ^= 1 << bit;
            if let Ok((_, valid)) = replay(&Bytes::from(bytes)) {
                prop_assert!(valid <= i);
            }
        }
    }
}
