//! What brokers ask the active controller, and what it answers: the messages a broker's
//! shard 0 sends over its shard mesh and, when another broker is the active controller, over
//! the network (`broker/src/controller/forward.rs`). Serialisable for that reason; the
//! controller service runs them (`broker/src/controller/`).

use super::op::{ControllerAnswer, ControllerOp};
use serde::{Deserialize, Serialize};

/// What a broker asks the active controller.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ControllerRequest {
    /// A metadata change asked by broker `from` (the owner of what it creates for itself).
    Op { from: i32, op: ControllerOp },
    /// A new block of producer ids for broker `from` (KRaft's AllocateProducerIds).
    AllocateProducerIds { from: i32 },
    /// Broker `broker_id`'s heartbeat (KRaft's BrokerHeartbeat): its registration's epoch,
    /// the metadata log index it has installed, and whether it wants to shut down.
    Heartbeat {
        broker_id: i32,
        broker_epoch: i64,
        metadata_offset: u64,
        want_shut_down: bool,
    },
}

/// What the active controller answers a [`ControllerRequest`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ControllerReply {
    /// A metadata change's answer, and the metadata log index of the image it was answered
    /// from (its entry's, for a change): a broker that forwarded the change waits until it has
    /// installed that image itself, so that what was created is usable through it at once.
    Answer {
        answer: ControllerAnswer,
        applied_index: u64,
    },
    /// A block of producer ids, `start..end`, for the requesting broker.
    ProducerIds { start: i64, end: i64 },
    /// A heartbeat's answer (BrokerHeartbeatResponse's fields).
    Heartbeat {
        is_fenced: bool,
        should_shut_down: bool,
    },
}
