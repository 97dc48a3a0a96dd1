//! One transactional id's state and Kafka's transitions of it (`TransactionMetadata`,
//! `TransactionCoordinator`'s checks): a pure state machine, no I/O. The coordinator
//! ([`super::service`]) asks it for the next state (a [`TxnTransit`], which becomes the
//! `__transaction_state` record), appends that record, and only then applies it
//! ([`TxnMetadata::complete`]); meanwhile the id has a pending state and every other request
//! answers `CONCURRENT_TRANSACTIONS`, as Kafka's `pendingState` does. A failed append drops
//! the pending state ([`TxnMetadata::abandon`]).
//!
//! Both transaction versions (KIP-890): with a client at transaction version 1 (EndTxn v0–4)
//! the producer epoch changes on InitProducerId and when the coordinator fences an open
//! transaction; at version 2 (EndTxn v5, part 2) every EndTxn also bumps it — PrepareCommit
//! or PrepareAbort is written with the next epoch, the markers carry it, and EndTxn answers
//! it — and when that exhausts the epochs of the producer id, the prepared record names the
//! next producer id (`next_producer_id`), which the completed record takes with epoch 0.
//! A version-2 EndTxn retried with the epoch before the bump is answered as the first was
//! (Kafka's `retryOnEpochBump` / `retryOnOverflow`), and may abort with nothing open.
//!
//! Invariants: a transaction in `Ongoing` or `PrepareCommit` has at least one partition
//! (`PrepareAbort` may have none: a version-2 abort with nothing open); `Empty` has none;
//! every transition goes to a state whose valid previous states
//! ([`TxnState::valid_previous`]) include the current one.

use std::collections::BTreeSet;
use storage::TopicPartition;

/// Kafka's "no producer id" and "no producer epoch".
pub const NO_PRODUCER_ID: i64 = -1;
/// See [`NO_PRODUCER_ID`].
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// A client's transaction version as the coordinator records it (Kafka's
/// `clientTransactionVersion`, stored in the log): 0 for the requests of transaction version
/// 1 (EndTxn v0–4, AddPartitionsToTxn v0–3, AddOffsetsToTxn), 2 for those of version 2.
pub const CLIENT_TXN_VERSION_1: i16 = 0;
/// See [`CLIENT_TXN_VERSION_1`].
pub const CLIENT_TXN_VERSION_2: i16 = 2;

/// Whether transitions at `client_transaction_version` bump the epoch per transaction
/// (Kafka's `TransactionVersion.supportsEpochBump`).
pub fn supports_epoch_bump(client_transaction_version: i16) -> bool {
    client_transaction_version >= CLIENT_TXN_VERSION_2
}

/// A transactional id's state (Kafka's `TransactionState`, with its ids as stored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnState {
    /// No transaction open (after InitProducerId).
    Empty,
    /// Partitions were added: a transaction is open.
    Ongoing,
    /// EndTxn(commit) was written; the markers are being sent.
    PrepareCommit,
    /// EndTxn(abort), a fence or a timeout was written; the markers are being sent.
    PrepareAbort,
    /// Every partition has its commit marker.
    CompleteCommit,
    /// Every partition has its abort marker.
    CompleteAbort,
    /// The id expired (`transactional.id.expiration.ms`); written as a tombstone.
    Dead,
    /// An open transaction is being fenced by a new producer or a timeout: the pending state
    /// on the way to `PrepareAbort`, never a current one.
    PrepareEpochFence,
}

impl TxnState {
    /// The id stored in `TransactionLogValue.TransactionStatus`.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// The state stored as `id`; `None` for an id Kafka does not define.
    pub fn from_id(id: i8) -> Option<TxnState> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// Kafka's name (DescribeTransactions, ListTransactions, logs).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The states this one may be entered from (Kafka's `validPreviousStates`).
    pub fn valid_previous(self) -> &'static [TxnState] {
        use TxnState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            // Transaction version 2: an abort when the client is unsure whether a
            // transaction is open (KIP-890 part 2).
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether an id in this state may expire (`transactional.id.expiration.ms`).
    pub fn expiration_allowed(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

/// Why the coordinator refuses a request, named after the Kafka error it is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("another transition of this transactional id is in progress")]
    ConcurrentTransactions,
    #[error("the request does not fit the transaction's state")]
    InvalidTxnState,
    #[error("a newer producer with this transactional id fenced this one")]
    ProducerFenced,
    #[error("the producer id is not the transactional id's")]
    InvalidProducerIdMapping,
    #[error("transaction.timeout.ms is not positive or exceeds transaction.max.timeout.ms")]
    InvalidTransactionTimeout,
    #[error("the partition was not added to the transaction (KIP-890)")]
    TransactionAbortable,
    #[error("the transactional id is empty")]
    InvalidRequest,
    #[error("the transactional id is not known to its coordinator")]
    TransactionalIdNotFound,
    #[error("this broker does not coordinate the transactional id")]
    NotCoordinator,
    #[error("the transactional id's partition is still being loaded")]
    CoordinatorLoadInProgress,
    #[error("the coordinator is not available (its log or producer ids unavailable)")]
    CoordinatorNotAvailable,
    #[error("the producer epochs of this producer id are exhausted")]
    EpochExhausted,
}

impl From<crate::coordinator_runtime::NotServing> for TxnError {
    fn from(e: crate::coordinator_runtime::NotServing) -> TxnError {
        match e {
            crate::coordinator_runtime::NotServing::LoadInProgress => {
                TxnError::CoordinatorLoadInProgress
            }
            crate::coordinator_runtime::NotServing::NotCoordinator => TxnError::NotCoordinator,
        }
    }
}

/// The target of one transition (Kafka's `TxnTransitMetadata`): what is written to
/// `__transaction_state`, then applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnTransit {
    pub producer_id: i64,
    /// The producer id before this transition (a rotation's old id).
    pub previous_producer_id: i64,
    /// Transaction version 2: the producer id the completed transaction moves to, because
    /// this one's epochs are exhausted ([`NO_PRODUCER_ID`]: none).
    pub next_producer_id: i64,
    /// The client's transaction version ([`CLIENT_TXN_VERSION_1`] or
    /// [`CLIENT_TXN_VERSION_2`]).
    pub client_transaction_version: i16,
    pub producer_epoch: i16,
    /// KIP-360: the epoch before the last bump, so a retried InitProducerId is recognised.
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    /// When the open transaction started, ms since the epoch (-1: none).
    pub start_ms: i64,
    pub last_update_ms: i64,
}

/// One transactional id's state (Kafka's `TransactionMetadata`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    pub previous_producer_id: i64,
    /// See [`TxnTransit::next_producer_id`].
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    /// The transaction version of the client's last transition (see
    /// [`TxnTransit::client_transaction_version`]).
    pub client_transaction_version: i16,
    /// `transaction.timeout.ms` the producer asked for.
    pub timeout_ms: i32,
    pub state: TxnState,
    /// The partitions of the open transaction (invariant: empty in `Empty`).
    pub partitions: BTreeSet<TopicPartition>,
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// The state a transition being written goes to (Kafka's `pendingState`).
    pub pending: Option<TxnState>,
    /// A fence's bumped epoch may not have been written: the next fence does not bump again.
    pub has_failed_epoch_fence: bool,
    /// The pending transition is a fence's abort.
    fencing: bool,
}

/// What InitProducerId does next ([`TxnMetadata::init_producer_id`]).
#[derive(Debug, PartialEq, Eq)]
pub enum InitStep {
    /// Write this transition (epoch bump or new producer id), then answer with it.
    Write(TxnTransit),
    /// The epochs of the producer id are exhausted: ask again with a new producer id.
    NeedProducerId,
    /// A transaction is open: write this abort (epoch fenced), send its markers, and answer
    /// `CONCURRENT_TRANSACTIONS` so the producer retries once it completed.
    FenceAndAbort(TxnTransit),
}

/// What EndTxn does next ([`TxnMetadata::end_txn`]).
#[derive(Debug, PartialEq, Eq)]
pub enum EndStep {
    /// Already completed with the same result (a retry): answer success with this producer
    /// id and epoch (transaction version 2 answers them).
    Done {
        producer_id: i64,
        producer_epoch: i16,
    },
    /// Write this PrepareCommit/PrepareAbort, then send the markers.
    Write(TxnTransit),
    /// Transaction version 2 exhausts the producer id's epochs: ask again with the next
    /// producer id.
    NeedProducerId,
}

/// Whether `epoch` is the last a producer id may have (Kafka's `isEpochExhausted`).
pub fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// Checks `transaction.timeout.ms` against `transaction.max.timeout.ms`. Errors:
/// [`TxnError::InvalidTransactionTimeout`] when not positive or above the maximum.
pub fn check_timeout(timeout_ms: i32, max_timeout_ms: i32) -> Result<(), TxnError> {
    if timeout_ms <= 0 || timeout_ms > max_timeout_ms {
        return Err(TxnError::InvalidTransactionTimeout);
    }
    Ok(())
}

impl TxnMetadata {
    /// A new transactional id with `producer_id` and no epoch yet, Empty.
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            client_transaction_version: CLIENT_TXN_VERSION_1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            pending: None,
            has_failed_epoch_fence: false,
            fencing: false,
        }
    }

    /// The metadata a stored transit describes (a replayed record; Kafka does not store the
    /// last epoch, so it is unknown after a load).
    pub fn from_stored(transactional_id: &str, t: TxnTransit) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id: t.producer_id,
            previous_producer_id: t.previous_producer_id,
            next_producer_id: t.next_producer_id,
            producer_epoch: t.producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            client_transaction_version: t.client_transaction_version,
            timeout_ms: t.timeout_ms,
            state: t.state,
            partitions: t.partitions,
            start_ms: t.start_ms,
            last_update_ms: t.last_update_ms,
            pending: None,
            has_failed_epoch_fence: false,
            fencing: false,
        }
    }

    /// InitProducerId with `timeout_ms` (already checked) and, for KIP-360, the producer's
    /// current id and epoch (`expected`); `new_producer_id` once [`InitStep::NeedProducerId`]
    /// was answered; `transaction_version` is the cluster's finalized level, which the fence
    /// of an open transaction applies. Errors: `ConcurrentTransactions` while a transition is
    /// written or a transaction completes, `ProducerFenced` when `expected` is not this id's
    /// producer (or its epoch is stale).
    pub fn init_producer_id(
        &mut self,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        new_producer_id: Option<i64>,
        transaction_version: i16,
        now_ms: i64,
    ) -> Result<InitStep, TxnError> {
        if self.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        // KIP-360: the expected producer must be this id's (or its previous one, when it
        // retries after a rotation it never heard of).
        let valid_producer = |(pid, epoch): (i64, i16)| {
            self.producer_epoch == NO_PRODUCER_EPOCH
                || pid == self.producer_id
                || (pid == self.previous_producer_id && epoch_exhausted(epoch))
        };
        if !expected.is_none_or(valid_producer) {
            return Err(TxnError::ProducerFenced);
        }
        match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let rotate = epoch_exhausted(self.producer_epoch)
                    && expected.is_none_or(|(_, e)| e == self.producer_epoch);
                if rotate {
                    let Some(id) = new_producer_id else {
                        return Ok(InitStep::NeedProducerId);
                    };
                    let last = if expected.is_some() {
                        self.producer_epoch
                    } else {
                        NO_PRODUCER_EPOCH
                    };
                    return self
                        .prepare(
                            TxnState::Empty,
                            id,
                            0,
                            last,
                            timeout_ms,
                            BTreeSet::new(),
                            -1,
                            now_ms,
                        )
                        .map(InitStep::Write);
                }
                self.bump_epoch(timeout_ms, expected.map(|(_, e)| e), now_ms)
                    .map(InitStep::Write)
            }
            TxnState::Ongoing => {
                if self.fence_needs_producer_id(transaction_version) && new_producer_id.is_none() {
                    return Ok(InitStep::NeedProducerId);
                }
                self.prepare_fence_abort(transaction_version, new_producer_id, now_ms)
                    .map(InitStep::FenceAndAbort)
            }
            TxnState::Dead | TxnState::PrepareEpochFence => Err(TxnError::InvalidTxnState),
        }
    }

    /// Kafka's `prepareIncrementProducerEpoch`: the next epoch, or — KIP-360 — the current
    /// one again when `expected` is the previous epoch (a retry of a bump that succeeded).
    fn bump_epoch(
        &mut self,
        timeout_ms: i32,
        expected: Option<i16>,
        now_ms: i64,
    ) -> Result<TxnTransit, TxnError> {
        if epoch_exhausted(self.producer_epoch) {
            return Err(TxnError::EpochExhausted);
        }
        let bumped = self.producer_epoch + 1;
        let (epoch, last) = match expected {
            None => (bumped, NO_PRODUCER_EPOCH),
            Some(e) if self.producer_epoch == NO_PRODUCER_EPOCH || e == self.producer_epoch => {
                (bumped, self.producer_epoch)
            }
            Some(e) if e == self.last_producer_epoch => {
                (self.producer_epoch, self.last_producer_epoch)
            }
            Some(_) => return Err(TxnError::ProducerFenced),
        };
        self.prepare(
            TxnState::Empty,
            self.producer_id,
            epoch,
            last,
            timeout_ms,
            BTreeSet::new(),
            -1,
            now_ms,
        )
    }

    /// The epoch a fence of the open transaction bumps to (Kafka's
    /// `prepareFenceProducerEpoch`): once, even if an earlier fence's write failed, and never
    /// past `i16::MAX`.
    fn fenced_epoch(&self) -> i16 {
        if self.has_failed_epoch_fence || self.producer_epoch == i16::MAX {
            self.producer_epoch
        } else {
            self.producer_epoch + 1
        }
    }

    /// Whether a fence at the cluster's `transaction_version` (its finalized level) exhausts
    /// the producer id's epochs, so [`TxnMetadata::prepare_fence_abort`] wants the next
    /// producer id.
    pub fn fence_needs_producer_id(&self, transaction_version: i16) -> bool {
        supports_epoch_bump(transaction_version)
            && self.state == TxnState::Ongoing
            && epoch_exhausted(self.fenced_epoch())
    }

    /// Fences the open transaction (a new producer's InitProducerId, or its timeout): the
    /// epoch is bumped — once, even if the first attempt's write failed — and the
    /// transaction goes to `PrepareAbort` at that epoch (Kafka's `prepareFenceProducerEpoch`
    /// followed by `endTransaction(ABORT, isFromClient = false)` at the cluster's finalized
    /// `transaction_version`: at version 2 the abort bumps the epoch once more, and names
    /// `next_producer_id` when that exhausts the epochs). The bumped epoch is this id's at
    /// once, so the fenced producer's requests are refused from now on.
    pub fn prepare_fence_abort(
        &mut self,
        transaction_version: i16,
        next_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Result<TxnTransit, TxnError> {
        if self.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if self.state != TxnState::Ongoing {
            return Err(TxnError::InvalidTxnState);
        }
        // PrepareEpochFence is the pending state for the instant the epoch is bumped: Kafka
        // clears it at once to make way for PrepareAbort.
        self.check_transition(TxnState::PrepareEpochFence)?;
        let client_transaction_version = if supports_epoch_bump(transaction_version) {
            CLIENT_TXN_VERSION_2
        } else {
            CLIENT_TXN_VERSION_1
        };
        let next_producer_id = match next_producer_id {
            Some(id) if self.fence_needs_producer_id(transaction_version) => id,
            _ => NO_PRODUCER_ID,
        };
        self.producer_epoch = self.fenced_epoch();
        self.last_producer_epoch = NO_PRODUCER_EPOCH;
        let transit = self.prepare_end(
            TxnState::PrepareAbort,
            client_transaction_version,
            next_producer_id,
            false,
            now_ms,
        )?;
        self.fencing = true;
        Ok(transit)
    }

    /// Kafka's `prepareAbortOrCommit`: PrepareCommit or PrepareAbort of the partitions; at
    /// transaction version 2 with the next epoch (none past `i16::MAX`: an abort there goes
    /// through at `i16::MAX`) and the previous one as the last. `nothing_added`: a version-2
    /// abort with no transaction open starts its (empty) transaction now.
    fn prepare_end(
        &mut self,
        next: TxnState,
        client_transaction_version: i16,
        next_producer_id: i64,
        nothing_added: bool,
        now_ms: i64,
    ) -> Result<TxnTransit, TxnError> {
        let (epoch, last) = if supports_epoch_bump(client_transaction_version) {
            if self.producer_epoch == i16::MAX {
                (self.producer_epoch, self.producer_epoch)
            } else {
                (self.producer_epoch + 1, self.producer_epoch)
            }
        } else {
            (self.producer_epoch, self.last_producer_epoch)
        };
        let start_ms = if nothing_added { now_ms } else { self.start_ms };
        let mut transit = self.prepare(
            next,
            self.producer_id,
            epoch,
            last,
            self.timeout_ms,
            self.partitions.clone(),
            start_ms,
            now_ms,
        )?;
        transit.next_producer_id = next_producer_id;
        transit.client_transaction_version = client_transaction_version;
        Ok(transit)
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn's partition): `Ok(None)` when every partition
    /// is already in the open transaction. Errors: `InvalidProducerIdMapping`,
    /// `ProducerFenced`, `ConcurrentTransactions` (a transition written or the transaction
    /// completing), `InvalidTxnState`.
    pub fn add_partitions(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
        client_transaction_version: i16,
        now_ms: i64,
    ) -> Result<Option<TxnTransit>, TxnError> {
        self.check_producer(producer_id, producer_epoch)?;
        if self.pending.is_some()
            || matches!(self.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
        {
            return Err(TxnError::ConcurrentTransactions);
        }
        if self.state == TxnState::Ongoing && partitions.is_subset(&self.partitions) {
            return Ok(None);
        }
        let start_ms = match self.state {
            TxnState::Empty | TxnState::CompleteAbort | TxnState::CompleteCommit => now_ms,
            _ => self.start_ms,
        };
        let all = self.partitions.union(partitions).cloned().collect();
        let mut transit = self.prepare(
            TxnState::Ongoing,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            all,
            start_ms,
            now_ms,
        )?;
        transit.client_transaction_version = client_transaction_version;
        Ok(Some(transit))
    }

    /// KIP-890 part 1's check of a partition leader (AddPartitionsToTxn v4+ `verify_only`):
    /// per partition, whether it is in the open transaction (`TransactionAbortable` if not).
    /// Errors, for all: `InvalidProducerIdMapping`, `ProducerFenced`,
    /// `ConcurrentTransactions` while the transaction completes.
    pub fn verify(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<Result<(), TxnError>>, TxnError> {
        if self.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if self.producer_epoch != producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        if matches!(self.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(partitions
            .iter()
            .map(|tp| {
                if self.partitions.contains(tp) {
                    Ok(())
                } else {
                    Err(TxnError::TransactionAbortable)
                }
            })
            .collect())
    }

    /// EndTxn from the producer (`commit` or abort) at `client_transaction_version` (EndTxn
    /// v5 is version 2, KIP-890 part 2); `next_producer_id` once [`EndStep::NeedProducerId`]
    /// was answered. Errors: `InvalidProducerIdMapping`, `ProducerFenced` (another epoch; at
    /// version 2 also an epoch that is no retry of the last EndTxn), `ConcurrentTransactions`
    /// (a transition written, or the same end still completing), `InvalidTxnState` (nothing
    /// open, or the other end).
    pub fn end_txn(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        client_transaction_version: i16,
        next_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Result<EndStep, TxnError> {
        if supports_epoch_bump(client_transaction_version) {
            return self.end_txn_v2(
                producer_id,
                producer_epoch,
                commit,
                next_producer_id,
                now_ms,
            );
        }
        self.check_producer(producer_id, producer_epoch)?;
        if self.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        match (self.state, commit) {
            (TxnState::Ongoing, _) => {
                let next = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                self.prepare_end(next, CLIENT_TXN_VERSION_1, NO_PRODUCER_ID, false, now_ms)
                    .map(EndStep::Write)
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(self.done()),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// EndTxn at transaction version 2 (Kafka's `endTransaction` with `supportsEpochBump`):
    /// the epoch is bumped by every end; an EndTxn with the epoch before the last bump (or,
    /// after a rotation, the old producer id at `i16::MAX - 1`) is a retry of it, answered
    /// as it was; an abort is accepted with nothing open (an empty transaction).
    fn end_txn_v2(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        next_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Result<EndStep, TxnError> {
        let retry_on_overflow = producer_id == self.previous_producer_id
            && producer_epoch == i16::MAX - 1
            && self.producer_epoch == 0;
        let retry_on_epoch_bump = i32::from(self.producer_epoch) == i32::from(producer_epoch) + 1;
        let valid_epoch = match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_epoch_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                retry_on_epoch_bump || retry_on_overflow || producer_epoch == self.producer_epoch
            }
            _ => producer_epoch == self.producer_epoch,
        };
        let retry = retry_on_epoch_bump || retry_on_overflow;
        if producer_id != self.producer_id && !retry_on_overflow {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if !valid_epoch {
            return Err(TxnError::ProducerFenced);
        }
        if self.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        use TxnState::*;
        let (next, nothing_added) = match (self.state, commit) {
            (Ongoing, true) => (PrepareCommit, false),
            (Ongoing, false) => (PrepareAbort, false),
            (CompleteCommit, true) | (CompleteAbort, false) if retry => return Ok(self.done()),
            (CompleteCommit | CompleteAbort | Empty, false) if !retry => (PrepareAbort, true),
            (PrepareCommit, true) | (PrepareAbort, false) => {
                return Err(TxnError::ConcurrentTransactions)
            }
            _ => return Err(TxnError::InvalidTxnState),
        };
        let next_producer_id = if epoch_exhausted(self.producer_epoch) {
            match next_producer_id {
                Some(id) => id,
                None => return Ok(EndStep::NeedProducerId),
            }
        } else {
            NO_PRODUCER_ID
        };
        self.prepare_end(
            next,
            CLIENT_TXN_VERSION_2,
            next_producer_id,
            nothing_added,
            now_ms,
        )
        .map(EndStep::Write)
    }

    /// A retried EndTxn's answer: this id's producer id and epoch.
    fn done(&self) -> EndStep {
        EndStep::Done {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
        }
    }

    /// Every partition has its marker: the transaction completes (Kafka's `prepareComplete`).
    /// Errors: `InvalidTxnState` unless in PrepareCommit or PrepareAbort,
    /// `ConcurrentTransactions` while a transition is written.
    pub fn prepare_complete(&mut self, now_ms: i64) -> Result<TxnTransit, TxnError> {
        if self.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        let next = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return Err(TxnError::InvalidTxnState),
        };
        self.has_failed_epoch_fence = false;
        // Transaction version 2 at exhausted epochs: the next producer id, at epoch 0; the
        // last epoch stays the one the client saw (Kafka's `prepareComplete`).
        let v2 = supports_epoch_bump(self.client_transaction_version);
        let (producer_id, epoch, last) = if v2 && self.next_producer_id != NO_PRODUCER_ID {
            (self.next_producer_id, 0, self.last_producer_epoch)
        } else if v2 {
            (
                self.producer_id,
                self.producer_epoch,
                self.last_producer_epoch,
            )
        } else {
            (self.producer_id, self.producer_epoch, self.producer_epoch)
        };
        let mut transit = self.prepare(
            next,
            producer_id,
            epoch,
            last,
            self.timeout_ms,
            BTreeSet::new(),
            self.start_ms,
            now_ms,
        )?;
        transit.client_transaction_version = self.client_transaction_version;
        Ok(transit)
    }

    /// Whether this id has been idle past `expiration_ms` at `now_ms`
    /// (`transactional.id.expiration.ms`): no transaction open, none being written.
    pub fn expired(&self, now_ms: i64, expiration_ms: i64) -> bool {
        self.state.expiration_allowed()
            && self.pending.is_none()
            && now_ms.saturating_sub(self.last_update_ms) >= expiration_ms
    }

    /// Whether the open transaction has outlived its `transaction.timeout.ms` at `now_ms`
    /// (the coordinator then aborts it with an epoch bump).
    pub fn timed_out(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing
            && self.pending.is_none()
            && self.start_ms.saturating_add(i64::from(self.timeout_ms)) < now_ms
    }

    /// The id expires: written as a tombstone, then removed. Errors: `InvalidTxnState` when
    /// a transaction is open or completing.
    pub fn prepare_dead(&mut self) -> Result<TxnTransit, TxnError> {
        if self.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        self.prepare(
            TxnState::Dead,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            BTreeSet::new(),
            self.start_ms,
            self.last_update_ms,
        )
    }

    /// `transit`'s record was written: it becomes this id's state (Kafka's
    /// `completeTransitionTo`, with its checks). Errors: `InvalidTxnState` when `transit` is
    /// not the pending transition (nothing is changed then).
    pub fn complete(&mut self, transit: TxnTransit) -> Result<(), TxnError> {
        if self.pending != Some(transit.state) {
            return Err(TxnError::InvalidTxnState);
        }
        let same_producer = transit.producer_id == self.producer_id
            && transit.producer_epoch == self.producer_epoch;
        let v2 = supports_epoch_bump(transit.client_transaction_version);
        // Kafka's `validProducerEpoch`: at transaction version 2 a prepared end carries the
        // next epoch (the current one as its last), and a completion may move to the next
        // producer id at epoch 0.
        let valid_producer = match transit.state {
            TxnState::CompleteCommit | TxnState::CompleteAbort
                if v2 && transit.producer_epoch == 0 =>
            {
                transit.last_producer_epoch == self.last_producer_epoch
                    && transit.previous_producer_id == self.producer_id
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort if v2 => {
                transit.last_producer_epoch == self.producer_epoch
                    && transit.producer_id == self.producer_id
            }
            _ => same_producer,
        };
        let valid = match transit.state {
            TxnState::Empty => {
                let bump = transit.producer_epoch == self.producer_epoch.wrapping_add(1)
                    || (transit.producer_epoch == 0 && transit.producer_id != self.producer_id)
                    || transit.producer_epoch == self.producer_epoch;
                bump && transit.partitions.is_empty() && transit.start_ms == -1
            }
            TxnState::Ongoing => {
                same_producer
                    && self.partitions.is_subset(&transit.partitions)
                    && transit.timeout_ms == self.timeout_ms
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                let empty_abort = v2
                    && transit.state == TxnState::PrepareAbort
                    && matches!(
                        self.state,
                        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                    );
                valid_producer
                    && transit.partitions == self.partitions
                    && (transit.start_ms == self.start_ms || empty_abort)
            }
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                valid_producer && transit.start_ms != -1
            }
            TxnState::Dead | TxnState::PrepareEpochFence => false,
        };
        if !valid {
            return Err(TxnError::InvalidTxnState);
        }
        // Kafka keeps the previous producer id but on an epoch bump or a version-2
        // completion (a rotation's old id).
        if transit.state == TxnState::Empty
            || (v2
                && matches!(
                    transit.state,
                    TxnState::CompleteCommit | TxnState::CompleteAbort
                ))
        {
            self.previous_producer_id = transit.previous_producer_id;
        }
        self.next_producer_id = transit.next_producer_id;
        self.client_transaction_version = transit.client_transaction_version;
        self.producer_id = transit.producer_id;
        self.producer_epoch = transit.producer_epoch;
        self.last_producer_epoch = transit.last_producer_epoch;
        self.timeout_ms = transit.timeout_ms;
        self.partitions = transit.partitions;
        self.start_ms = transit.start_ms;
        self.last_update_ms = transit.last_update_ms;
        self.state = transit.state;
        self.pending = None;
        self.fencing = false;
        Ok(())
    }

    /// The pending transition's write failed: the id is as it was (a fence's epoch stays
    /// bumped, and is not bumped again by the next fence).
    pub fn abandon(&mut self) {
        if self.fencing {
            self.has_failed_epoch_fence = true;
        }
        self.fencing = false;
        self.pending = None;
    }

    fn check_producer(&self, producer_id: i64, producer_epoch: i16) -> Result<(), TxnError> {
        if self.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if self.producer_epoch != producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(())
    }

    fn check_transition(&self, to: TxnState) -> Result<(), TxnError> {
        if self.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if !to.valid_previous().contains(&self.state) {
            return Err(TxnError::InvalidTxnState);
        }
        Ok(())
    }

    /// Kafka's `prepareTransitionTo`: checks the move and sets the pending state.
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &mut self,
        state: TxnState,
        producer_id: i64,
        producer_epoch: i16,
        last_producer_epoch: i16,
        timeout_ms: i32,
        partitions: BTreeSet<TopicPartition>,
        start_ms: i64,
        now_ms: i64,
    ) -> Result<TxnTransit, TxnError> {
        self.check_transition(state)?;
        assert!(producer_id >= 0, "a transition keeps a producer id");
        assert!(
            state == TxnState::Dead || producer_epoch >= 0,
            "a transition keeps an epoch"
        );
        self.pending = Some(state);
        Ok(TxnTransit {
            producer_id,
            previous_producer_id: self.producer_id,
            next_producer_id: NO_PRODUCER_ID,
            client_transaction_version: self.client_transaction_version,
            producer_epoch,
            last_producer_epoch,
            timeout_ms,
            state,
            partitions,
            start_ms,
            last_update_ms: now_ms,
        })
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
