//! The metadata controller, on shard 0: this node's voter of the controller quorum (raft-rs,
//! `replication::raft`; one voter, this node, without `controller.quorum.voters`; none on a
//! broker-only node, `process.roles=broker`, which observes the log instead), and the
//! service that runs each metadata change on the active controller as
//! lock → propose records against the applied image (`replication::metadata::propose`) →
//! one Raft entry, committed by a majority of the voters (fsynced on each) → applied by every
//! voter's state machine → installed on every shard of this broker before answering (so a
//! topic is usable on every shard as soon as CreateTopics returns).
//!
//! Every voter's shard 0 publishes the image its state machine applied to its shards
//! ([`publisher`]); a new data directory's first active controller names the cluster and
//! carries over an older single-node store ([`bootstrap`]).
//!
//! Producer ids come in blocks of `PRODUCER_ID_BLOCK_SIZE` (a ProducerIdsRecord each, as in
//! KRaft): the controller hands ids out of its current block in memory and appends a record
//! only when the block is used up. A restart starts a new block, skipping the rest of the old
//! one, so no id is handed out twice.

//!
//! Files, one floor each: [`channel`] is what the services call (a change to run on the active
//! controller, here or over the network); [`active`] is the active controller's side (commit
//! an op's records, the producer-id blocks); [`fencing`] its broker-lifecycle ops (heartbeats,
//! fencing); [`balance`] its leader balance (`auto.leader.rebalance.enable`); [`lifecycle`] the broker side of those (registration, heartbeats, controlled
//! shutdown: Kafka's BrokerLifecycleManager; over a host trait, so that
//! `lifecycle_sim_tests` runs it under the simulation); [`quorum_state`] DescribeQuorum's view of the quorum; [`state`] shard 0's controller state,
//! the broker's side of the lifecycle included; [`observer`] a broker-only node's following of
//! the metadata log (`process.roles=broker`) and the active controller's answers to it;
//! [`bootstrap`] a new metadata log's first records; [`forward`] the wire of a forwarded request;
//! [`voters`] where the controllers a voter change added are reached; [`joining`] a controller
//! joining a running quorum learning where the voters are. The metadata publisher, which drives
//! the data plane from the applied image, sits above in `crate::publisher`; the runtime starts
//! all of it (`crate::runtime`).

mod active;
mod balance;
pub mod bootstrap;
mod channel;
mod fencing;
pub mod forward;
mod joining;
mod lifecycle;
#[cfg(test)]
mod lifecycle_sim_tests;
mod observer;
mod quorum_state;
pub mod state;
pub mod voters;

pub use active::{has_other_live_brokers, serving};
pub(crate) use balance::balance_leaders;
pub use bootstrap::Startup;
pub(crate) use channel::route;
pub use channel::{
    add_voter, allocate_producer_id, allocate_producer_id_here, answer_forwarded, call,
    call_answer, describe_quorum, remove_voter, serve_forwarded, voter_endpoints,
};
pub(crate) use fencing::fence_expired;
pub(crate) use joining::learn_from_bootstrap;
pub use lifecycle::controlled_shutdown;
pub(crate) use lifecycle::run_broker;
pub(crate) use observer::run as run_observer;
