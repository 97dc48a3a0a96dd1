//! The metadata image as the controller quorum's [`StateMachine`] (KRaft's metadata loader):
//! each committed Raft entry holds the records of one controller change, applied whole or not
//! at all; snapshots hold the image as records.
//!
//! Entry and snapshot bytes (inside the Raft log's own CRC-checked records and frames):
//! `format version u8 | JSON body`, the body `{"records": [...]}` for an entry and
//! `{"cluster_id": "...", "records": [...]}` for a snapshot. Every voter applies the same
//! entries to the same image, so an entry whose records do not apply (proposed against an
//! image that changed before it committed) is skipped by every voter alike; its proposer
//! learns it from [`MetadataView::outcome`].
//!
//! The state machine runs inside the Raft driver task and shares a [`MetadataView`] with the
//! controller service on the same thread (hence `Rc`): the latest image, the index it
//! reflects, the recent entries' outcomes, the known leader, and a [`Notify`] rung at every
//! change.

use super::image::{ApplyError, MetadataImage};
use super::record::{MetadataRecord, VoterEndpointRecord};
use super::request::{FetchedEntry, FetchedMetadata};
use crate::raft::{
    configuration_entry, AppliedVoterChange, ChangeKind, RaftIndex, RaftTerm, Recovered,
    StateMachine,
};
use crate::runtime::NodeId;
use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use storage::Notify;

/// Most committed entries a [`MetadataView`] keeps for observers ([`MetadataView::fetch_after`]);
/// an observer further behind gets the whole image.
pub const TAIL_ENTRIES_MAX: usize = 4_096;
/// Most bytes of entries a [`MetadataView`] keeps for observers.
pub const TAIL_BYTES_MAX: usize = 16 << 20;
/// Most bytes of entries one [`MetadataView::fetch_after`] answer carries (at least one entry).
pub const FETCH_BYTES_MAX: usize = 1 << 20;

/// Format version of entries and snapshots.
pub const ENTRY_FORMAT_VERSION: u8 = 1;
/// Most recent entry outcomes [`MetadataView::outcome`] remembers (a proposer asks right
/// after its proposal resolved, so it needs only the last few).
pub const OUTCOMES_MAX: usize = 4_096;

/// An entry or a snapshot could not be encoded or decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EntryError {
    #[error("metadata entry format version {found}, expected {ENTRY_FORMAT_VERSION}")]
    Version { found: u8 },
    #[error("an empty metadata entry")]
    Empty,
    #[error("metadata entry body: {reason}")]
    Body { reason: String },
    /// A snapshot's records do not rebuild an image.
    #[error("metadata snapshot record {position}: {source}")]
    Rebuild { position: usize, source: ApplyError },
    /// An observer's fetch answered from another cluster's metadata log.
    #[error("the controller serves cluster {theirs}, this node belongs to cluster {ours}")]
    OtherCluster { ours: String, theirs: String },
}

#[derive(Serialize, Deserialize)]
struct EntryBody {
    records: Vec<MetadataRecord>,
}

#[derive(Serialize, Deserialize)]
struct SnapshotBody {
    cluster_id: String,
    records: Vec<MetadataRecord>,
}

fn encode<T: Serialize>(body: &T) -> Result<Bytes, EntryError> {
    let json = serde_json::to_vec(body).map_err(|e| EntryError::Body {
        reason: e.to_string(),
    })?;
    let mut out = BytesMut::with_capacity(1 + json.len());
    out.put_u8(ENTRY_FORMAT_VERSION);
    out.put_slice(&json);
    Ok(out.freeze())
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, EntryError> {
    let (&version, json) = bytes.split_first().ok_or(EntryError::Empty)?;
    if version != ENTRY_FORMAT_VERSION {
        return Err(EntryError::Version { found: version });
    }
    serde_json::from_slice(json).map_err(|e| EntryError::Body {
        reason: e.to_string(),
    })
}

/// The Raft entry holding the records of one change. Errors: [`EntryError::Body`] when they
/// do not serialise.
pub fn encode_entry(records: &[MetadataRecord]) -> Result<Bytes, EntryError> {
    encode(&EntryBody {
        records: records.to_vec(),
    })
}

/// The records of one entry. Errors: [`EntryError`] for bytes that are not an entry of this
/// format (never panics: the bytes come from peers).
pub fn decode_entry(bytes: &[u8]) -> Result<Vec<MetadataRecord>, EntryError> {
    decode::<EntryBody>(bytes).map(|body| body.records)
}

/// The snapshot bytes of `image`.
pub fn encode_snapshot(image: &MetadataImage) -> Result<Bytes, EntryError> {
    encode(&SnapshotBody {
        cluster_id: image.cluster_id.clone(),
        records: image.to_records(),
    })
}

/// The image a snapshot holds. Errors: [`EntryError`].
pub fn decode_snapshot(bytes: &[u8]) -> Result<MetadataImage, EntryError> {
    let body: SnapshotBody = decode(bytes)?;
    let mut image = MetadataImage::new(body.cluster_id);
    for (position, record) in body.records.iter().enumerate() {
        image
            .apply(record)
            .map_err(|source| EntryError::Rebuild { position, source })?;
    }
    Ok(image)
}

/// What became of a committed entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryOutcome {
    /// Its records were applied.
    Applied,
    /// It was skipped whole: it did not decode, or a record did not apply (`reason`).
    Skipped { reason: String },
}

/// The applied metadata, shared by the state machine (writer) and the controller service
/// (readers) on one thread.
pub struct MetadataView {
    image: Arc<MetadataImage>,
    applied: RaftIndex,
    leader: Option<NodeId>,
    term: RaftTerm,
    outcomes: VecDeque<(RaftIndex, EntryOutcome)>,
    /// The last applied entries, for observers: at most [`TAIL_ENTRIES_MAX`] and
    /// [`TAIL_BYTES_MAX`] (`tail_bytes`), in index order, every one after `tail_floor`.
    tail: VecDeque<(RaftIndex, Bytes)>,
    tail_bytes: usize,
    /// The applied index just before the first entry of `tail` (a restored snapshot's, or the
    /// last entry dropped from it): `tail` holds every applied entry after it.
    tail_floor: RaftIndex,
    /// Whether `tail` is kept (a voter's view; an observer serves nobody).
    keeps_tail: bool,
    changed: Rc<Notify>,
}

impl MetadataView {
    /// The latest applied image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.clone()
    }

    /// The index of the last entry reflected in [`MetadataView::image`] (0: none yet).
    pub fn applied_index(&self) -> RaftIndex {
        self.applied
    }

    /// The active controller (the Raft leader) as this node knows it, with its term.
    pub fn leader(&self) -> (Option<NodeId>, RaftTerm) {
        (self.leader, self.term)
    }

    /// The outcome of the entry at `index`, if it is among the last [`OUTCOMES_MAX`] applied
    /// non-empty entries.
    pub fn outcome(&self, index: RaftIndex) -> Option<&EntryOutcome> {
        self.outcomes
            .iter()
            .rev()
            .find(|(at, _)| *at == index)
            .map(|(_, outcome)| outcome)
    }

    /// Rung at every applied entry, restored snapshot and leader change.
    pub fn changed(&self) -> Rc<Notify> {
        self.changed.clone()
    }

    /// What an observer that applied everything up to `after` needs next: the applied entries
    /// after it (at most [`FETCH_BYTES_MAX`] bytes of them, at least one), or the whole image
    /// when this view no longer keeps the entries right after `after`. An observer ahead of
    /// this view (it fetched from a leader that had applied more) gets no entries.
    pub fn fetch_after(&self, after: RaftIndex) -> FetchedMetadata {
        assert!(
            self.tail_floor <= self.applied,
            "the entries kept follow the applied index"
        );
        if after < self.tail_floor {
            return FetchedMetadata::Image {
                index: self.applied.0,
                cluster_id: self.image.cluster_id.clone(),
                records: self.image.to_records(),
            };
        }
        let mut entries = Vec::new();
        let mut bytes = 0;
        for (index, entry) in self.tail.iter().filter(|(index, _)| *index > after) {
            if !entries.is_empty() && bytes + entry.len() > FETCH_BYTES_MAX {
                break;
            }
            bytes += entry.len();
            entries.push(FetchedEntry {
                index: index.0,
                records: decode_entry(entry).ok(),
            });
        }
        FetchedMetadata::Entries(entries)
    }

    fn remember(&mut self, index: RaftIndex, entry: &[u8]) {
        if !self.keeps_tail {
            return;
        }
        assert!(
            self.tail.back().is_none_or(|(last, _)| *last < index),
            "entries are applied in index order"
        );
        self.tail.push_back((index, Bytes::copy_from_slice(entry)));
        self.tail_bytes += entry.len();
        while self.tail.len() > TAIL_ENTRIES_MAX || self.tail_bytes > TAIL_BYTES_MAX {
            let Some((dropped, bytes)) = self.tail.pop_front() else {
                break;
            };
            self.tail_bytes -= bytes.len();
            self.tail_floor = dropped;
        }
    }
}

/// The [`StateMachine`] applying metadata entries to a [`MetadataImage`].
pub struct MetadataStateMachine {
    view: Rc<RefCell<MetadataView>>,
}

impl MetadataStateMachine {
    /// A voter's state machine starting from `image` (empty, or converted from an older
    /// store), and the view it keeps current (with the last entries, for observers).
    pub fn new(image: MetadataImage) -> (MetadataStateMachine, Rc<RefCell<MetadataView>>) {
        Self::with_tail(image, true)
    }

    /// An observer's state machine (`process.roles=broker`): as [`MetadataStateMachine::new`],
    /// keeping no entries (it serves no other observer).
    pub fn observer(image: MetadataImage) -> (MetadataStateMachine, Rc<RefCell<MetadataView>>) {
        Self::with_tail(image, false)
    }

    fn with_tail(
        image: MetadataImage,
        keeps_tail: bool,
    ) -> (MetadataStateMachine, Rc<RefCell<MetadataView>>) {
        let view = Rc::new(RefCell::new(MetadataView {
            image: Arc::new(image),
            applied: RaftIndex(0),
            leader: None,
            term: RaftTerm(0),
            outcomes: VecDeque::new(),
            tail: VecDeque::new(),
            tail_bytes: 0,
            tail_floor: RaftIndex(0),
            keeps_tail,
            changed: Rc::new(Notify::default()),
        }));
        (MetadataStateMachine { view: view.clone() }, view)
    }

    fn ring(&self) {
        let changed = self.view.borrow().changed.clone();
        changed.notify_all();
    }

    /// An observer's step (`process.roles=broker`): applies what it fetched from the active
    /// controller of `cluster_id` — its entries as a voter applies them (an entry that does
    /// not decode is skipped, as every voter skipped it), or its image as a restored snapshot —
    /// and takes `leader` of `term` as the known leader unless it knows a later term. Entries
    /// and images at or below the applied index are ignored (a repeated or stale answer: the
    /// applied index never goes back). Errors: [`EntryError::OtherCluster`] when this
    /// observer's image names another cluster; an image whose records do not rebuild one (the
    /// observer keeps its image either way).
    pub fn apply_fetched(
        &mut self,
        leader: NodeId,
        term: RaftTerm,
        cluster_id: &str,
        fetched: FetchedMetadata,
    ) -> Result<(), EntryError> {
        let (ours, before) = {
            let view = self.view.borrow();
            (view.image.cluster_id.clone(), view.applied)
        };
        if !ours.is_empty() && ours != cluster_id {
            return Err(EntryError::OtherCluster {
                ours,
                theirs: cluster_id.to_string(),
            });
        }
        match fetched {
            FetchedMetadata::Entries(entries) => {
                for entry in entries {
                    let index = RaftIndex(entry.index);
                    if index <= self.view.borrow().applied {
                        continue;
                    }
                    let bytes = match &entry.records {
                        Some(records) => encode_entry(records)?,
                        None => Bytes::new(),
                    };
                    self.apply(index, &bytes);
                }
            }
            FetchedMetadata::Image {
                index,
                cluster_id,
                records,
            } => {
                if RaftIndex(index) > before {
                    let snapshot = encode(&SnapshotBody {
                        cluster_id,
                        records,
                    })?;
                    self.restore(RaftIndex(index), snapshot)?;
                }
            }
        }
        assert!(
            self.view.borrow().applied >= before,
            "an observer's applied index never goes back"
        );
        let (known, known_term) = self.view.borrow().leader();
        if term >= known_term && (known, known_term) != (Some(leader), term) {
            self.leader_changed(Some(leader), term);
        }
        Ok(())
    }
}

/// `image` with the records of `entry` applied, or why the entry is skipped (it does not
/// decode, or a record does not apply; the image unchanged). What every voter does with a
/// committed entry.
pub fn apply_entry(image: &MetadataImage, entry: &[u8]) -> Result<MetadataImage, String> {
    let records = decode_entry(entry).map_err(|e| e.to_string())?;
    let mut next = image.clone();
    for record in &records {
        next.apply(record).map_err(|e| e.to_string())?;
    }
    Ok(next)
}

/// The record a voter change leaves in the image: the added node's endpoint (`endpoint`, UTF-8
/// `ip:port`; one that is not UTF-8 is recorded as none), or the removed node's removal.
fn voter_endpoint_record(node: NodeId, kind: ChangeKind, endpoint: &[u8]) -> MetadataRecord {
    let endpoint = match kind {
        ChangeKind::Remove => None,
        ChangeKind::AddLearner | ChangeKind::AddVoter => {
            std::str::from_utf8(endpoint).ok().map(str::to_string)
        }
    };
    MetadataRecord::VoterEndpoint(VoterEndpointRecord {
        node_id: node.0,
        endpoint,
    })
}

/// The image a recovered Raft log holds once its committed entries are applied, and the index
/// of the last non-empty one (what [`MetadataView::applied_index`] reaches): what the state machine reaches after a restart, computed without
/// running the quorum (the broker opens its partitions from it before it starts).
///
/// `sole_voter`: this node is the quorum's only voter, so every entry it persisted is
/// committed (the durable commit index lags: raft-rs persists the hard state that advances it
/// with a later `Ready`, which may never come before a stop). Otherwise only entries up to
/// the durable commit index count; the rest comes with the quorum. Errors: a snapshot that
/// does not decode.
pub fn recover_image(
    recovered: &Recovered,
    sole_voter: bool,
) -> Result<(MetadataImage, RaftIndex), EntryError> {
    let snapshot = &recovered.snapshot;
    let snapshot_index = snapshot.get_metadata().index;
    let mut image = if snapshot_index > 0 {
        decode_snapshot(&snapshot.data)?
    } else {
        MetadataImage::new(String::new())
    };
    let commit = if sole_voter {
        u64::MAX
    } else {
        recovered.hard_state.commit.max(snapshot_index)
    };
    let mut applied = snapshot_index;
    for entry in recovered.entries.iter().filter(|e| e.index <= commit) {
        // A voter change: its endpoint record, as the state machine applies it.
        let data = match configuration_entry(entry) {
            Some((node, kind, endpoint)) => {
                encode_entry(&[voter_endpoint_record(node, kind, &endpoint)])?
            }
            None => entry.data.clone(),
        };
        // Raft's own empty entries never reach the state machine (nor its applied index).
        if !data.is_empty() {
            if let Ok(next) = apply_entry(&image, &data) {
                image = next;
            }
            applied = entry.index;
        }
    }
    Ok((image, RaftIndex(applied)))
}

impl StateMachine for MetadataStateMachine {
    type RestoreError = EntryError;

    fn apply(&mut self, index: RaftIndex, entry: &[u8]) {
        {
            let mut view = self.view.borrow_mut();
            let outcome = match apply_entry(&view.image, entry) {
                Ok(next) => {
                    view.image = Arc::new(next);
                    EntryOutcome::Applied
                }
                Err(reason) => EntryOutcome::Skipped { reason },
            };
            view.applied = index;
            view.remember(index, entry);
            if view.outcomes.len() == OUTCOMES_MAX {
                view.outcomes.pop_front();
            }
            view.outcomes.push_back((index, outcome));
        }
        self.ring();
    }

    /// Records the added voter's endpoint (the entry's context: `host:port`), or the removed
    /// one's removal, as a [`VoterEndpointRecord`] applied at the configuration entry's index,
    /// like an entry of the log: the image, the tail observers fetch and snapshots carry it.
    /// An endpoint that is not UTF-8 is recorded as nothing (the proposer writes UTF-8).
    fn voters_changed(&mut self, index: RaftIndex, change: &AppliedVoterChange) {
        let record = voter_endpoint_record(change.node, change.kind, &change.endpoint);
        // One small record always encodes.
        if let Ok(entry) = encode_entry(&[record]) {
            self.apply(index, &entry);
        }
    }

    fn snapshot(&self) -> Bytes {
        // The image is made only of records that applied, so it always serialises.
        encode_snapshot(&self.view.borrow().image).unwrap_or_default()
    }

    fn restore(&mut self, index: RaftIndex, snapshot: Bytes) -> Result<(), EntryError> {
        let image = decode_snapshot(&snapshot)?;
        {
            let mut view = self.view.borrow_mut();
            view.image = Arc::new(image);
            view.applied = index;
            view.outcomes.clear();
            view.tail.clear();
            view.tail_bytes = 0;
            view.tail_floor = index;
        }
        self.ring();
        Ok(())
    }

    fn leader_changed(&mut self, leader: Option<NodeId>, term: RaftTerm) {
        {
            let mut view = self.view.borrow_mut();
            view.leader = leader;
            view.term = term;
        }
        self.ring();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::record::{PartitionRecord, TopicRecord};
    use uuid::Uuid;

    fn topic(name: &str, id: Uuid) -> Vec<MetadataRecord> {
        vec![
            MetadataRecord::Topic(TopicRecord {
                name: name.to_string(),
                topic_id: id,
                internal: false,
            }),
            MetadataRecord::Partition(PartitionRecord {
                partition_id: 0,
                topic_id: id,
                replicas: vec![1],
                isr: vec![1],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                removing_replicas: Vec::new(),
                adding_replicas: Vec::new(),
            }),
        ]
    }

    #[test]
    fn entries_apply_whole_or_not_at_all_and_say_so() {
        let (mut machine, view) = MetadataStateMachine::new(MetadataImage::new("c".into()));
        let id = Uuid::from_u128(7);
        machine.apply(RaftIndex(1), &encode_entry(&topic("a", id)).unwrap());
        // The same topic id again: its first record does not apply, so nothing of it does.
        let mut again = topic("b", id);
        again.reverse();
        machine.apply(RaftIndex(2), &encode_entry(&again).unwrap());
        machine.apply(RaftIndex(3), b"\x01not json");
        machine.apply(RaftIndex(4), b"\x09{}");
        let view = view.borrow();
        assert_eq!(view.applied_index(), RaftIndex(4));
        assert_eq!(view.outcome(RaftIndex(1)), Some(&EntryOutcome::Applied));
        for index in 2..=4 {
            assert!(
                matches!(
                    view.outcome(RaftIndex(index)),
                    Some(EntryOutcome::Skipped { .. })
                ),
                "entry {index} must be skipped"
            );
        }
        let image = view.image();
        assert_eq!(image.topics.keys().collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn a_snapshot_restores_an_equal_image() {
        let (mut machine, view) = MetadataStateMachine::new(MetadataImage::new("c".into()));
        machine.apply(
            RaftIndex(1),
            &encode_entry(&topic("a", Uuid::from_u128(1))).unwrap(),
        );
        let snapshot = machine.snapshot();
        let (mut other, other_view) = MetadataStateMachine::new(MetadataImage::new("x".into()));
        other.restore(RaftIndex(1), snapshot).unwrap();
        assert_eq!(*other_view.borrow().image(), *view.borrow().image());
        assert_eq!(other_view.borrow().applied_index(), RaftIndex(1));
        assert!(matches!(
            other.restore(RaftIndex(2), Bytes::from_static(b"\x01[")),
            Err(EntryError::Body { .. })
        ));
        assert_eq!(decode_entry(b""), Err(EntryError::Empty));
    }

    #[test]
    fn recovery_counts_committed_entries_or_every_entry_of_a_sole_voter() {
        use raft::eraftpb::Entry;
        let entry = |index: u64, data: Bytes| Entry {
            index,
            term: 1,
            data,
            ..Entry::default()
        };
        let mut recovered = Recovered {
            entries: vec![
                entry(1, encode_entry(&[cluster("c")]).unwrap()),
                // Raft's own empty entry (a new leader's first): no data, not counted.
                entry(2, Bytes::new()),
                entry(3, encode_entry(&topic("a", Uuid::from_u128(1))).unwrap()),
            ],
            ..Recovered::default()
        };
        recovered.hard_state.commit = 2;
        let (image, applied) = recover_image(&recovered, false).unwrap();
        assert_eq!((image.cluster_id.as_str(), applied), ("c", RaftIndex(1)));
        assert!(image.topics.is_empty(), "entry 3 is not committed");
        let (image, applied) = recover_image(&recovered, true).unwrap();
        assert_eq!(applied, RaftIndex(3));
        assert!(
            image.topics.contains_key("a"),
            "a sole voter's persisted entry is committed"
        );
    }

    /// An observer that fetches from a voter's view ends with the voter's image and applied
    /// index: from entries while the voter keeps them, from the image once it does not, and
    /// with skipped entries skipped alike.
    #[test]
    fn an_observer_fetching_from_a_voter_ends_with_its_image() {
        let (mut voter, voter_view) = MetadataStateMachine::new(MetadataImage::new(String::new()));
        let (mut observer, observer_view) =
            MetadataStateMachine::observer(MetadataImage::new(String::new()));
        let follow = |observer: &mut MetadataStateMachine| loop {
            let after = observer_view.borrow().applied_index();
            let fetched = voter_view.borrow().fetch_after(after);
            if fetched == FetchedMetadata::Entries(Vec::new()) {
                return;
            }
            observer
                .apply_fetched(NodeId(1), RaftTerm(3), "c", fetched)
                .unwrap();
        };
        voter.apply(RaftIndex(1), &encode_entry(&[cluster("c")]).unwrap());
        // Raft's own empty entries never reach the state machine: indices have gaps.
        voter.apply(
            RaftIndex(3),
            &encode_entry(&topic("a", Uuid::from_u128(1))).unwrap(),
        );
        voter.apply(RaftIndex(4), b"\x01not json");
        voter.apply(
            RaftIndex(5),
            &encode_entry(&topic("a", Uuid::from_u128(2))).unwrap(),
        );
        follow(&mut observer);
        {
            let (v, o) = (voter_view.borrow(), observer_view.borrow());
            assert_eq!(*o.image(), *v.image());
            assert_eq!(o.applied_index(), RaftIndex(5));
            assert_eq!(o.leader(), (Some(NodeId(1)), RaftTerm(3)));
            assert!(matches!(
                o.outcome(RaftIndex(5)),
                Some(EntryOutcome::Skipped { .. })
            ));
        }
        // The voter moves on by more bytes of entries than it keeps (a broker config of
        // 1 MiB, set again and again): the observer gets the image.
        let first = 6;
        let last = first + (TAIL_BYTES_MAX >> 20) as u64 + 2;
        for index in first..=last {
            let config = MetadataRecord::Config(crate::metadata::record::ConfigRecord {
                resource_type: crate::metadata::record::CONFIG_RESOURCE_BROKER,
                resource_name: String::new(),
                name: "k".into(),
                value: Some(format!("{index}{}", "0".repeat(1 << 20))),
            });
            voter.apply(RaftIndex(index), &encode_entry(&[config]).unwrap());
        }
        assert!(matches!(
            voter_view.borrow().fetch_after(RaftIndex(5)),
            FetchedMetadata::Image { .. }
        ));
        follow(&mut observer);
        let (v, o) = (voter_view.borrow(), observer_view.borrow());
        assert_eq!(*o.image(), *v.image());
        assert_eq!(o.applied_index(), RaftIndex(last));
        // A repeated answer changes nothing, nor does a stale image.
        drop((v, o));
        let again = voter_view.borrow().fetch_after(RaftIndex(last - 3));
        observer
            .apply_fetched(NodeId(1), RaftTerm(3), "c", again)
            .unwrap();
        let stale = FetchedMetadata::Image {
            index: 5,
            cluster_id: "c".into(),
            records: Vec::new(),
        };
        observer
            .apply_fetched(NodeId(1), RaftTerm(3), "c", stale)
            .unwrap();
        assert_eq!(observer_view.borrow().applied_index(), RaftIndex(last));
        assert_eq!(
            *observer_view.borrow().image(),
            *voter_view.borrow().image()
        );
        // Another cluster's answer is refused; a deposed leader's (an earlier term) does not
        // take the leadership back.
        let nothing = || FetchedMetadata::Entries(Vec::new());
        let other = observer.apply_fetched(NodeId(2), RaftTerm(9), "x", nothing());
        assert!(
            matches!(other, Err(EntryError::OtherCluster { .. })),
            "{other:?}"
        );
        observer
            .apply_fetched(NodeId(2), RaftTerm(2), "c", nothing())
            .unwrap();
        assert_eq!(
            observer_view.borrow().leader(),
            (Some(NodeId(1)), RaftTerm(3))
        );
        // An observer keeps no entries for others; a voter does.
        assert!(observer_view.borrow().tail.is_empty());
        assert!(!voter_view.borrow().tail.is_empty());
    }

    fn cluster(id: &str) -> MetadataRecord {
        MetadataRecord::ClusterId(crate::metadata::record::ClusterIdRecord {
            cluster_id: id.to_string(),
        })
    }
}
