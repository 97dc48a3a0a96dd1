//! Broker sessions as the active controller sees them (KRaft's `BrokerHeartbeatManager`):
//! when each registered broker last heartbeated, so the controller can fence the ones whose
//! session expired ([`super::ControllerOp::FenceBroker`]) and refuse a second incarnation
//! while the first one's session is live ([`super::ProposeContext::broker_session_live`]).
//!
//! Pure: no I/O and no clock of its own; the caller passes `now` ([`MonotonicTime`], from its
//! runtime) to every call. Not replicated: only the active controller keeps one, and one that
//! has just become active gives every registered broker a full session from then
//! ([`BrokerHeartbeats::reset_all`]), since it cannot know when the brokers last reached its
//! predecessor (Kafka does the same).
//!
//! Invariant: the tracked brokers are exactly the image's registered brokers, with their
//! epochs and fenced flags, as of the last [`BrokerHeartbeats::follow`].

use super::image::MetadataImage;
use crate::runtime::MonotonicTime;
use std::collections::BTreeMap;
use std::time::Duration;

/// One registered broker's session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Session {
    /// The registration the session belongs to; a heartbeat for another is refused.
    broker_epoch: i64,
    fenced: bool,
    last_heartbeat: MonotonicTime,
}

/// The sessions of the registered brokers, keyed by broker id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrokerHeartbeats {
    sessions: BTreeMap<i32, Session>,
}

impl BrokerHeartbeats {
    /// No broker tracked.
    pub fn new() -> BrokerHeartbeats {
        BrokerHeartbeats::default()
    }

    /// Follows `image` after a change (KRaft replays registrations into the heartbeat
    /// manager): a broker newly registered, or registered again with a new epoch, gets a
    /// session starting at `now`; an unregistered one is dropped; fenced flags are copied.
    pub fn follow(&mut self, image: &MetadataImage, now: MonotonicTime) {
        self.sessions
            .retain(|broker_id, _| image.brokers.contains_key(broker_id));
        for (broker_id, b) in &image.brokers {
            let session = self.sessions.entry(*broker_id).or_insert(Session {
                broker_epoch: b.broker_epoch,
                fenced: b.fenced,
                last_heartbeat: now,
            });
            if session.broker_epoch != b.broker_epoch {
                session.broker_epoch = b.broker_epoch;
                session.last_heartbeat = now;
            }
            session.fenced = b.fenced;
        }
    }

    /// A heartbeat of `broker_id` with `broker_epoch` at `now`; `false` (and ignored) when the
    /// broker is not tracked or the epoch is not its registration's (Kafka answers
    /// `STALE_BROKER_EPOCH`). A fenced broker heartbeats too (while it catches up).
    pub fn heartbeat(&mut self, broker_id: i32, broker_epoch: i64, now: MonotonicTime) -> bool {
        match self.sessions.get_mut(&broker_id) {
            Some(session) if session.broker_epoch == broker_epoch => {
                session.last_heartbeat = session.last_heartbeat.max(now);
                true
            }
            _ => false,
        }
    }

    /// Whether `broker_id` has a valid session at `now` (Kafka's `hasValidSession`): tracked,
    /// unfenced, and heartbeated no longer than `session_timeout` ago.
    pub fn is_live(&self, broker_id: i32, now: MonotonicTime, session_timeout: Duration) -> bool {
        self.sessions.get(&broker_id).is_some_and(|s| {
            !s.fenced && now.saturating_duration_since(s.last_heartbeat) <= session_timeout
        })
    }

    /// The unfenced brokers whose last heartbeat is more than `session_timeout` before `now`,
    /// by id: the controller fences each.
    pub fn expired(&self, now: MonotonicTime, session_timeout: Duration) -> Vec<i32> {
        self.sessions
            .iter()
            .filter(|(_, s)| {
                !s.fenced && now.saturating_duration_since(s.last_heartbeat) > session_timeout
            })
            .map(|(broker_id, _)| *broker_id)
            .collect()
    }

    /// Gives every tracked broker a full session from `now`: call when this controller has
    /// just become active (Kafka resets the heartbeat manager on activation).
    pub fn reset_all(&mut self, now: MonotonicTime) {
        for session in self.sessions.values_mut() {
            session.last_heartbeat = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{MetadataRecord, RegisterBrokerRecord, UnfenceBrokerRecord};
    use uuid::Uuid;

    const TIMEOUT: Duration = Duration::from_secs(9);

    fn at(secs: u64) -> MonotonicTime {
        MonotonicTime(Duration::from_secs(secs))
    }

    fn image_with(brokers: &[(i32, i64, bool)]) -> MetadataImage {
        let mut image = MetadataImage::new("c".into());
        for &(broker_id, broker_epoch, fenced) in brokers {
            image
                .apply(&MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                    broker_id,
                    incarnation_id: Uuid::from_u128(1),
                    broker_epoch,
                    end_points: Vec::new(),
                    rack: None,
                    fenced: true,
                    in_controlled_shutdown: false,
                }))
                .unwrap();
            if !fenced {
                image
                    .apply(&MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
                        broker_id,
                        broker_epoch,
                    }))
                    .unwrap();
            }
        }
        image
    }

    #[test]
    fn sessions_expire_after_the_timeout_and_heartbeats_renew_them() {
        let mut hb = BrokerHeartbeats::new();
        hb.follow(
            &image_with(&[(1, 0, false), (2, 1, false), (3, 2, true)]),
            at(0),
        );
        assert!(hb.heartbeat(1, 0, at(5)));
        assert!(!hb.heartbeat(2, 7, at(5)), "a stale epoch is refused");
        assert!(
            !hb.heartbeat(4, 0, at(5)),
            "an unregistered broker is refused"
        );
        assert!(
            hb.is_live(2, at(9), TIMEOUT),
            "exactly the timeout is still live"
        );
        assert!(!hb.is_live(2, at(10), TIMEOUT));
        assert!(
            !hb.is_live(3, at(0), TIMEOUT),
            "a fenced broker has no valid session"
        );
        assert_eq!(
            hb.expired(at(10), TIMEOUT),
            [2],
            "fenced 3 is not expired again"
        );
        assert_eq!(hb.expired(at(15), TIMEOUT), [1, 2]);
        // An older `now` does not move a session back.
        assert!(hb.heartbeat(1, 0, at(1)));
        assert!(hb.is_live(1, at(14), TIMEOUT));
    }

    #[test]
    fn a_new_controller_gives_every_broker_a_full_session() {
        let mut hb = BrokerHeartbeats::new();
        hb.follow(&image_with(&[(1, 0, false), (2, 1, false)]), at(0));
        assert_eq!(hb.expired(at(100), TIMEOUT), [1, 2]);
        hb.reset_all(at(100));
        assert!(hb.expired(at(109), TIMEOUT).is_empty());
        assert!(hb.is_live(1, at(109), TIMEOUT));
    }

    #[test]
    fn following_the_image_tracks_registrations() {
        let mut hb = BrokerHeartbeats::new();
        hb.follow(&image_with(&[(1, 0, false), (2, 1, false)]), at(0));
        // Broker 1 registers again (epoch 5); broker 2 is unregistered.
        hb.follow(&image_with(&[(1, 5, false)]), at(20));
        assert!(!hb.heartbeat(1, 0, at(21)), "the old incarnation's epoch");
        assert!(!hb.heartbeat(2, 1, at(21)));
        assert!(
            hb.is_live(1, at(29), TIMEOUT),
            "the new session starts at 20"
        );
        assert_eq!(hb.expired(at(30), TIMEOUT), [1]);
        hb.follow(&image_with(&[(1, 5, true)]), at(30));
        assert!(
            hb.expired(at(30), TIMEOUT).is_empty(),
            "fenced: nothing to fence"
        );
    }
}
