//! The broker's side of the controller quorum (issue #14, DESIGN.md §9): [`start`] runs this
//! node's voter of `replication::raft::QuorumNode` on the current shard, over
//! - [`transport::TcpTransport`], TCP between the voters of `controller.quorum.voters`;
//! - `FileRaftStorage` in [`dir::QuorumDir`], `<log.dirs>/__cluster_metadata-0/`;
//! - the replication runtime seam ([`crate::seam::ShardRuntime`]).
//!
//! Modules: `wire` (the hello and frame bytes), `queue` (the bounded frame queues),
//! `transport`, `dir`. The state machine (the metadata image) is the caller's.
//!
//! Broker-only nodes (`process.roles=broker`) run no voter: they observe the metadata log
//! through the active controller (`crate::controller::observer`), over this listener.
//!
//! Voters change by KIP-853's AddRaftVoter / RemoveRaftVoter (`crate::controller`): a
//! controller joining a running quorum starts with no voters, and the transport reaches the
//! controllers a change added through a `transport::PeerResolver`.
//!
//! Limits: the Raft tick is fixed at [`BrokerConfig::QUORUM_TICK_MS`] and the leader's
//! heartbeat at two ticks; everything runs on the shard that calls [`start`].

pub mod dir;
mod queue;
#[cfg(test)]
mod quorum_tests;
pub mod transport;
mod wire;

use dir::QuorumDir;
use replication::raft::{
    FileRaftStorage, QuorumConfig, QuorumNode, RaftStorageError, StartError, StateMachine,
};
use replication::runtime::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use transport::TcpTransport;
use tuning::config::{BrokerConfig, ConfigError};

/// Why [`start`] failed.
#[derive(Debug, thiserror::Error)]
pub enum QuorumStartError {
    /// The quorum keys are inconsistent ([`BrokerConfig::check_quorum`]).
    #[error("the controller quorum configuration is invalid: {0}")]
    Config(#[from] ConfigError),
    /// The quorum directory could not be opened.
    #[error("opening the controller quorum's directory failed: {0}")]
    Dir(#[from] RaftStorageError),
    /// The quorum node refused its configuration or stored state.
    #[error(transparent)]
    Node(#[from] StartError),
}

/// The quorum's configuration for this node: `node.id` among `controller.quorum.voters`
/// (this node alone when none are configured, none when it joins a running quorum through
/// `controller.quorum.bootstrap.servers`), the tick and the election timeout in ticks.
fn quorum_config(config: &BrokerConfig) -> QuorumConfig {
    let this = NodeId(config.node_id);
    let voters = if config.joins_quorum() {
        // A controller joining a running quorum starts with no voters (KIP-853): it waits
        // until AddRaftVoter adds it, and catches up from the leader's snapshot.
        Vec::new()
    } else if config.controller_quorum_voters.is_empty() {
        vec![this]
    } else {
        let voters = &config.controller_quorum_voters;
        voters.iter().map(|v| NodeId(v.id)).collect()
    };
    let mut quorum = QuorumConfig::new(this, voters);
    quorum.tick_interval = config.quorum_tick();
    quorum.election_ticks = config.quorum_election_ticks();
    quorum.entry_bytes_max = METADATA_ENTRY_BYTES_MAX;
    quorum
}

/// Largest metadata entry (one change's records, JSON), bytes: a CreateTopics of
/// `PARTITIONS_PER_TOPIC_MAX` partitions is about 2 MiB, and fencing a broker that sits in
/// 100,000 ISRs about 14 MiB. Well inside the voter frame limit (`MESSAGE_BYTES_MAX`).
pub const METADATA_ENTRY_BYTES_MAX: usize = 16 << 20;

/// Starts this node's voter of the controller quorum on the current shard executor and
/// returns its handle; `state_machine` receives the committed entries (and snapshots).
///
/// Reads `node.id`, `controller.quorum.voters` (none: a one-voter quorum of this node, with
/// no listener), `controller.quorum.election.timeout.ms` and `log.dirs` (the state lives in
/// `<log.dirs>/__cluster_metadata-0/`). The transport serves `voter_listener`, bound on this
/// node's voter address before the executors started, reaches nodes beyond the configured
/// voters where `resolve` knows them, is secured by `security`
/// (`controller.listener.names`); `forwarded` answers brokers' requests arriving on that
/// listener (see [`transport`]).
///
/// # Errors
/// [`QuorumStartError`]: the quorum keys are inconsistent, the directory could not be
/// opened, or the stored state does not match (other voters, corruption).
pub async fn start<M: StateMachine + 'static>(
    config: &BrokerConfig,
    state_machine: M,
    voter_listener: Option<(crate::listener::Handoff, SocketAddr)>,
    resolve: transport::PeerResolver,
    security: transport::VoterSecurity,
    forwarded: Option<transport::ForwardedRequests>,
) -> Result<QuorumNode, QuorumStartError> {
    config.check_quorum()?;
    let quorum = quorum_config(config);
    let dir = QuorumDir::open(&config.data_dir).await?;
    let dir_path = dir.path().to_path_buf();
    let storage = FileRaftStorage::new(dir);
    let this = quorum.node;
    let peers: BTreeMap<NodeId, SocketAddr> = config
        .controller_quorum_voters
        .iter()
        .filter(|v| NodeId(v.id) != this)
        .map(|v| (NodeId(v.id), v.addr))
        .collect();
    let transport = TcpTransport::start(this, voter_listener, &peers, resolve, security, forwarded);
    tracing::info!(
        node = this.0,
        voters = quorum.voters.len(),
        listen = ?transport.local_addr(),
        dir = %dir_path.display(),
        "starting the controller quorum voter"
    );
    let node = QuorumNode::start(
        quorum,
        storage,
        transport,
        crate::seam::ShardRuntime,
        state_machine,
    )
    .await?;
    Ok(node)
}
