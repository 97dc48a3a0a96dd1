//! The follower's side of its fetch session with one leader (KIP-227), free of I/O: the first
//! fetch is full (session 0, epoch 0) and asks the leader to open a session; once it has, each
//! fetch names only the partitions whose parameters changed (a new fetch offset, epoch or log
//! start) or that are new, and the partitions left out since the last fetch as forgotten; the
//! leader answers only the partitions with something new, and the others keep their positions.
//! A leader that opens no session (session id 0) is asked again with full fetches. Any failed
//! exchange — a session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH), a
//! broken connection — starts over with a full fetch, as Kafka's `FetchSessionHandler`.

use std::collections::{BTreeMap, HashMap};

use net::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use storage::TopicPartition;
use uuid::Uuid;

/// A partition to fetch: its topic's id and its request parameters.
pub(super) type Wanted = HashMap<TopicPartition, (Uuid, FetchPartition)>;

/// The session with one leader, as this fetcher last left it.
#[derive(Debug, Default)]
pub(super) struct FetcherSession {
    /// The leader's session id; 0 for none (the next fetch is full and opens one).
    id: i32,
    /// The epoch of the next fetch of the session.
    epoch: i32,
    /// What the leader's session holds: each partition's parameters as last sent.
    sent: Wanted,
}

/// One fetch of the session: its session fields, topics and forgotten topics, and what the
/// leader's session holds once it is answered.
#[derive(Debug)]
pub(super) struct SessionFetch {
    pub session_id: i32,
    pub epoch: i32,
    pub topics: Vec<FetchTopic>,
    pub forgotten: Vec<ForgottenTopic>,
    holds: Wanted,
}

impl FetcherSession {
    /// The next fetch of `wanted`: everything when there is no session, else what changed.
    pub(super) fn next_fetch(&self, wanted: Wanted) -> SessionFetch {
        let full = self.id == 0;
        let mut topics: BTreeMap<Uuid, Vec<FetchPartition>> = BTreeMap::new();
        let mut forgotten: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
        for (tp, (topic_id, partition)) in &wanted {
            if full || self.sent.get(tp) != Some(&(*topic_id, partition.clone())) {
                topics.entry(*topic_id).or_default().push(partition.clone());
            }
        }
        if !full {
            for (tp, (topic_id, _)) in &self.sent {
                if !wanted.contains_key(tp) {
                    forgotten.entry(*topic_id).or_default().push(tp.partition);
                }
            }
        }
        SessionFetch {
            session_id: self.id,
            epoch: if full { 0 } else { self.epoch },
            topics: topics
                .into_iter()
                .map(|(topic_id, partitions)| {
                    FetchTopic::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions)
                })
                .collect(),
            forgotten: forgotten
                .into_iter()
                .map(|(topic_id, partitions)| {
                    ForgottenTopic::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions)
                })
                .collect(),
            holds: wanted,
        }
    }

    /// The leader answered `fetch` without a top-level error, naming session `session_id`.
    pub(super) fn answered(&mut self, fetch: SessionFetch, session_id: i32) {
        if fetch.session_id == 0 {
            // A full fetch: the leader opened a session, or none (then full fetches again).
            self.id = session_id;
            self.epoch = 1;
            self.sent = if session_id == 0 {
                Wanted::new()
            } else {
                fetch.holds
            };
        } else if session_id == self.id {
            self.epoch = if self.epoch == i32::MAX {
                1
            } else {
                self.epoch + 1
            };
            self.sent = fetch.holds;
        } else {
            // The leader closed the session (or answered another): start over.
            self.reset();
        }
    }

    /// Starts over: the next fetch is full and opens a new session.
    pub(super) fn reset(&mut self) {
        *self = FetcherSession::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition {
            topic: "t".into(),
            partition,
        }
    }

    fn wanted(offsets: &[(i32, i64)]) -> Wanted {
        offsets
            .iter()
            .map(|&(p, offset)| {
                (
                    tp(p),
                    (
                        Uuid::from_u128(7),
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(offset),
                    ),
                )
            })
            .collect()
    }

    fn named(fetch: &SessionFetch) -> Vec<(i32, i64)> {
        let mut named: Vec<_> = fetch
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.fetch_offset)))
            .collect();
        named.sort_unstable();
        named
    }

    fn forgotten(fetch: &SessionFetch) -> Vec<i32> {
        let mut f: Vec<_> = fetch
            .forgotten
            .iter()
            .flat_map(|t| t.partitions.clone())
            .collect();
        f.sort_unstable();
        f
    }

    #[test]
    fn a_session_sends_only_what_changed_and_forgets_what_is_left_out() {
        let mut session = FetcherSession::default();
        let fetch = session.next_fetch(wanted(&[(0, 5), (1, 9), (2, 0)]));
        assert_eq!((fetch.session_id, fetch.epoch), (0, 0));
        assert_eq!(named(&fetch), vec![(0, 5), (1, 9), (2, 0)]);
        session.answered(fetch, 42);

        let fetch = session.next_fetch(wanted(&[(0, 5), (1, 12), (2, 0)]));
        assert_eq!((fetch.session_id, fetch.epoch), (42, 1));
        assert_eq!(named(&fetch), vec![(1, 12)]);
        assert!(forgotten(&fetch).is_empty());
        session.answered(fetch, 42);

        // Partition 2 left out (throttled, failed), partition 3 new.
        let fetch = session.next_fetch(wanted(&[(0, 5), (1, 12), (3, 0)]));
        assert_eq!((fetch.session_id, fetch.epoch), (42, 2));
        assert_eq!(named(&fetch), vec![(3, 0)]);
        assert_eq!(forgotten(&fetch), vec![2]);
        session.answered(fetch, 42);

        // Nothing changed: an empty incremental fetch.
        let fetch = session.next_fetch(wanted(&[(0, 5), (1, 12), (3, 0)]));
        assert_eq!(fetch.epoch, 3);
        assert!(named(&fetch).is_empty() && forgotten(&fetch).is_empty());
    }

    #[test]
    fn no_session_opened_or_a_failure_means_full_fetches_again() {
        let mut session = FetcherSession::default();
        let fetch = session.next_fetch(wanted(&[(0, 5)]));
        session.answered(fetch, 0);
        let fetch = session.next_fetch(wanted(&[(0, 5)]));
        assert_eq!((fetch.session_id, fetch.epoch), (0, 0));
        assert_eq!(named(&fetch), vec![(0, 5)]);
        session.answered(fetch, 8);
        session.reset();
        let fetch = session.next_fetch(wanted(&[(0, 5)]));
        assert_eq!((fetch.session_id, fetch.epoch), (0, 0));
        assert_eq!(named(&fetch), vec![(0, 5)]);
        // A leader that answers an incremental fetch without the session closed it.
        session.answered(fetch, 8);
        let fetch = session.next_fetch(wanted(&[(0, 6)]));
        session.answered(fetch, 0);
        let fetch = session.next_fetch(wanted(&[(0, 6)]));
        assert_eq!((fetch.session_id, fetch.epoch), (0, 0));
    }
}
