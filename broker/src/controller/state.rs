//! The controller's state on shard 0: this node's voter of the controller quorum (none on a
//! broker-only node, which observes the metadata log: `super::observer`), the metadata view
//! its state machine keeps current, the lock that serialises this node's
//! proposals, how far every shard has installed the image, and the producer ids of the
//! current block. The controller service (`super`) runs the changes; the shard only holds
//! this.

use crate::rt::{Permit, Semaphore};
use replication::metadata::{BrokerHeartbeats, ControllerError, MetadataView};
use replication::raft::{QuorumNode, RaftIndex, RaftTerm, Role};
use replication::runtime::NodeId;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::rc::Rc;
use storage::Notify;
use uuid::Uuid;

/// Controller state.
pub struct Controller {
    /// Serialises this node's proposals: one change at a time is proposed against the image
    /// it will be appended after.
    pub(super) lock: Semaphore,
    /// This node's voter; `None` on a broker-only node (`process.roles=broker`), whose
    /// view an observer keeps current (`super::observer`).
    pub(super) quorum: Option<QuorumNode>,
    /// How this node's connections to the voters' addresses are secured (the client side of
    /// `controller.listener.names`): an observer's fetches, and requests forwarded to a
    /// controller-only active controller.
    pub(super) to_voters: crate::peer::PeerSecurity,
    /// On the active controller: the observers that fetched from it since it became active
    /// (DescribeQuorum's observers).
    pub(super) observers: RefCell<BTreeMap<i32, ObserverProgress>>,
    /// The term `observers` belong to: a new leadership lists those that fetch from it
    /// (Kafka's per-epoch leader state).
    pub(super) observers_term: Cell<RaftTerm>,
    /// What the quorum's state machine applied.
    pub(super) view: Rc<RefCell<MetadataView>>,
    /// Where each controller is reached.
    pub(super) voters: Rc<super::voters::VoterBook>,
    /// Index of the last entry whose image every shard has installed.
    pub(super) published: Cell<RaftIndex>,
    /// Rung when `published` moves.
    pub(super) published_changed: Rc<Notify>,
    /// This broker's producer ids of its current block not handed out yet (empty at start:
    /// the first InitProducerId asks the active controller for a block).
    pub(super) producer_ids: Cell<Range<i64>>,
    /// Serialises the refills of `producer_ids`.
    pub(super) producer_ids_lock: Semaphore,
    /// On the active controller: the registered brokers' sessions.
    pub(super) heartbeats: RefCell<BrokerHeartbeats>,
    /// On the active controller: the brokers that heartbeated to it since it became active.
    /// Only their sessions count as live when another incarnation registers (Kafka refuses
    /// it while the old session is valid): a broker's previous process, not heard from by
    /// this controller, is taken to be gone, so a restarted node (or a restarted one-node
    /// cluster) registers at once instead of after a session timeout.
    pub(super) heard: RefCell<BTreeSet<i32>>,
    /// On the active controller: the index at which each broker's registration committed
    /// (a broker that has installed it is caught up and may be unfenced); unknown after a
    /// failover, then 0.
    pub(super) registered_at: RefCell<BTreeMap<i32, RaftIndex>>,
    /// This broker's side of the lifecycle (registration, fenced or not).
    pub(super) broker: BrokerLifecycle,
    /// Registered host names of other brokers, resolved (forwarding reaches them).
    pub(super) resolved: RefCell<std::collections::HashMap<(String, u16), std::net::SocketAddr>>,
}

impl Controller {
    /// What the quorum's state machine applied (the publisher reads it).
    pub(crate) fn view(&self) -> &Rc<RefCell<MetadataView>> {
        &self.view
    }

    /// The publisher's mark: every shard has installed the image up to `applied`; wakes the
    /// proposers waiting for it. The mark only moves forward.
    pub(crate) fn mark_published(&self, applied: RaftIndex) {
        if applied > self.published.get() {
            self.published.set(applied);
        }
        self.published_changed.notify_all();
    }

    /// The state of a controller over `quorum` (`None`: an observer's), whose state machine
    /// keeps `view` current; `to_voters` secures connections to the voters' addresses.
    pub fn new(
        quorum: Option<QuorumNode>,
        view: Rc<RefCell<MetadataView>>,
        voters: Rc<super::voters::VoterBook>,
        to_voters: crate::peer::PeerSecurity,
    ) -> Controller {
        Controller {
            voters,
            lock: Semaphore::new(1),
            quorum,
            to_voters,
            observers: RefCell::new(BTreeMap::new()),
            observers_term: Cell::new(RaftTerm(0)),
            view,
            published: Cell::new(RaftIndex(0)),
            published_changed: Rc::new(Notify::default()),
            producer_ids: Cell::new(0..0),
            producer_ids_lock: Semaphore::new(1),
            heartbeats: RefCell::new(BrokerHeartbeats::new()),
            heard: RefCell::new(BTreeSet::new()),
            registered_at: RefCell::new(BTreeMap::new()),
            broker: BrokerLifecycle::new(Uuid::new_v4()),
            resolved: RefCell::new(std::collections::HashMap::new()),
        }
    }

    /// Waits for the controller's lock: one change at a time. Errors:
    /// [`ControllerError::Unavailable`] once the controller has stopped.
    pub(super) async fn lock(&self) -> Result<Permit<'_>, ControllerError> {
        self.lock
            .acquire_permit(1)
            .await
            .map_err(|_| ControllerError::Unavailable)
    }

    /// The active controller as this node knows it: this node when its voter leads; on an
    /// observer, the leader that last answered its fetch.
    pub fn active(&self) -> Option<NodeId> {
        let Some(quorum) = &self.quorum else {
            return self.view.borrow().leader().0;
        };
        let status = quorum.status();
        if status.stopped.is_some() {
            return None;
        }
        status.leader
    }

    /// Whether this node is the active controller (never on an observer).
    pub fn is_active(&self, node: NodeId) -> bool {
        self.quorum.as_ref().is_some_and(|quorum| {
            let status = quorum.status();
            status.stopped.is_none() && status.role == Role::Leader && status.leader == Some(node)
        })
    }

    /// This node's voter, `None` on an observer.
    pub(super) fn voter(&self) -> Option<&QuorumNode> {
        self.quorum.as_ref()
    }

    /// Whether this broker is registered and unfenced: it serves as a member of the cluster.
    pub fn serving(&self) -> bool {
        self.broker.serving()
    }

    /// Stops the voter (at shutdown); an observer stops with its shard.
    pub fn stop(&self) {
        if let Some(quorum) = &self.quorum {
            quorum.stop();
        }
    }
}

/// What the active controller knows of one observer (`super::observer`; DescribeQuorum's
/// observers).
#[derive(Clone, Copy, Debug)]
pub struct ObserverProgress {
    /// The index the observer had applied when it last fetched.
    pub applied: RaftIndex,
    /// When it last fetched.
    pub last_fetch: replication::runtime::MonotonicTime,
    /// When it last fetched having applied everything this controller had.
    pub last_caught_up: Option<replication::runtime::MonotonicTime>,
}

/// This broker's side of the lifecycle, as the controller last answered it (shard 0 holds it
/// in its [`Controller`]; `super::lifecycle` runs it).
pub struct BrokerLifecycle {
    /// This process's incarnation (KRaft's incarnation id): random per start.
    pub(super) incarnation_id: Uuid,
    /// This broker's registration epoch, once registered.
    pub(super) broker_epoch: Cell<Option<i64>>,
    /// Whether the controller's last heartbeat answer said this broker is fenced.
    pub(super) fenced: Cell<bool>,
    /// Whether the controller agreed to take this broker's replicas offline after its log
    /// directory failed (`crate::log_dir`; logged once).
    pub(super) replicas_offline: Cell<bool>,
}

impl BrokerLifecycle {
    /// Not registered yet (fenced), incarnation `incarnation_id`.
    pub fn new(incarnation_id: Uuid) -> BrokerLifecycle {
        BrokerLifecycle {
            incarnation_id,
            broker_epoch: Cell::new(None),
            fenced: Cell::new(true),
            replicas_offline: Cell::new(false),
        }
    }

    /// Whether this broker is registered and unfenced: it serves as a member of the cluster.
    pub fn serving(&self) -> bool {
        self.broker_epoch.get().is_some() && !self.fenced.get()
    }
}
