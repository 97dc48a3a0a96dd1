//! A simulated network implementing [`Transport`]: each message is delivered after a seeded
//! delay (so messages reorder), or dropped with a seeded chance; each node's inbox holds at
//! most [`INBOX_MESSAGES_MAX`] delivered messages (a full inbox refuses with
//! [`TransportError::QueueFull`]). Not modelled: partitions between chosen nodes, duplication.

use super::SimRuntime;
use crate::runtime::{LocalBoxFuture, NodeId, Runtime, Transport, TransportError};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;
use storage::Notify;

/// Most messages queued for one node (in flight towards it or delivered, not yet received).
pub const INBOX_MESSAGES_MAX: usize = 1024;

/// Link behaviour, in percent and µs.
#[derive(Clone, Copy, Debug)]
pub struct LinkFaults {
    /// Chance that a message is lost, in percent.
    pub drop_percent: u64,
    /// Longest delivery delay (µs); each message draws its own delay below it.
    pub delay_us_max: u64,
}

struct Inbox<M> {
    queued: usize,
    delivered: VecDeque<(NodeId, M)>,
    arrived: Rc<Notify>,
}

struct Shared<M> {
    runtime: SimRuntime,
    faults: LinkFaults,
    inboxes: RefCell<BTreeMap<NodeId, Inbox<M>>>,
}

/// The network: make an [`Endpoint`] per node.
pub struct SimNetwork<M> {
    shared: Rc<Shared<M>>,
}

impl<M: 'static> SimNetwork<M> {
    /// A network on `runtime` whose links behave as `faults` says.
    pub fn new(runtime: SimRuntime, faults: LinkFaults) -> SimNetwork<M> {
        SimNetwork {
            shared: Rc::new(Shared {
                runtime,
                faults,
                inboxes: RefCell::new(BTreeMap::new()),
            }),
        }
    }

    /// Attaches `node` and returns its transport.
    pub fn endpoint(&self, node: NodeId) -> Endpoint<M> {
        self.shared.inboxes.borrow_mut().insert(
            node,
            Inbox {
                queued: 0,
                delivered: VecDeque::new(),
                arrived: Rc::new(Notify::default()),
            },
        );
        Endpoint {
            node,
            shared: self.shared.clone(),
        }
    }
}

/// One node's side of the [`SimNetwork`].
pub struct Endpoint<M> {
    node: NodeId,
    shared: Rc<Shared<M>>,
}

impl<M: 'static> Transport for Endpoint<M> {
    type Message = M;

    fn send(&self, to: NodeId, message: M) -> Result<(), TransportError> {
        {
            let mut inboxes = self.shared.inboxes.borrow_mut();
            let inbox = inboxes
                .get_mut(&to)
                .ok_or(TransportError::Unreachable { to })?;
            if inbox.queued >= INBOX_MESSAGES_MAX {
                return Err(TransportError::QueueFull { to });
            }
            let runtime = &self.shared.runtime;
            if runtime.chance(self.shared.faults.drop_percent) {
                return Ok(()); // Lost on the wire: the sender cannot tell.
            }
            inbox.queued += 1;
        }
        let shared = self.shared.clone();
        let from = self.node;
        let delay =
            Duration::from_micros(shared.runtime.random(0..shared.faults.delay_us_max.max(1)));
        self.shared.runtime.spawn(Box::pin(async move {
            shared.runtime.sleep(delay).await;
            if let Some(inbox) = shared.inboxes.borrow_mut().get_mut(&to) {
                inbox.delivered.push_back((from, message));
                inbox.arrived.notify_all();
            }
        }));
        Ok(())
    }

    fn recv(&self) -> LocalBoxFuture<(NodeId, M)> {
        let (shared, node) = (self.shared.clone(), self.node);
        Box::pin(async move {
            loop {
                let arrived = {
                    let mut inboxes = shared.inboxes.borrow_mut();
                    // The endpoint exists while its `Endpoint` does: the network never
                    // detaches a node.
                    let Some(inbox) = inboxes.get_mut(&node) else {
                        unreachable!("node {node:?} attached to the network");
                    };
                    if let Some(message) = inbox.delivered.pop_front() {
                        inbox.queued -= 1;
                        return message;
                    }
                    inbox.arrived.notified()
                };
                arrived.await;
            }
        })
    }
}
