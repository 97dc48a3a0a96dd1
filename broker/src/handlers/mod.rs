//! Request handlers, one file per Kafka API (STYLE.md): decode → check → delegate to the
//! owning shard(s) → encode. [`supported_versions`] is the one registry of what this broker
//! advertises in ApiVersions; only versions that are fully implemented are listed.

mod acl_wire;
mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod add_raft_voter;
mod alter_client_quotas;
mod alter_configs;
mod alter_partition_reassignments;
mod alter_user_scram_credentials;
mod api_versions;
mod authorized_operations;
mod config_ops;
mod create_acls;
mod create_partitions;
mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_acls;
mod describe_client_quotas;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_quorum;
mod describe_topic_partitions;
mod describe_transactions;
mod describe_user_scram_credentials;
mod elect_leaders;
mod end_txn;
mod fetch;
mod find_coordinator;
mod handler_time;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leader_hints;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod produce;
mod produce_verification;
mod read_replica;
mod remove_raft_voter;
mod replica_assignment;
mod sasl_authenticate;
mod sasl_handshake;
mod sync_group;
mod txn_errors;
mod txn_offset_commit;
mod unregister_broker;
mod update_features;
mod wire;
mod write_txn_markers;

use crate::quotas::{request_time_percent, Metered};
use crate::response::Response;
use crate::session::Session;
use crate::shard::Shard;
use handler_time::HandlerTime;
use net::kafka_protocol::messages::{ApiKey, RequestKind};
use net::kafka_protocol::protocol::Encodable;
use net::{ApiVersionTable, Request};
use std::rc::Rc;
use std::sync::OnceLock;

/// The handler registry: every API this broker serves, once, with the versions it advertises
/// in ApiVersions (only fully implemented ones) and the call that serves it. From this one list
/// the macro builds [`APIS`] (the version table and metric names) and the dispatch `match`
/// (static dispatch; every handler but Produce's and Fetch's boxed, see `@place`).
///
/// Each entry is `Variant min..=max => |shard, request, call| expression`: `request` is the
/// decoded body of `RequestKind::Variant`, `call` the [`Call`] (version, correlation id,
/// client). A plain entry's expression is the response body, encoded here with the request
/// quota's throttle time in it ([`Call::request_throttle_ms`]); an `exempt` entry's likewise but
/// neither metered nor throttled (Kafka's exemptions, and bodies without a throttle time); a
/// `raw` entry's expression is the whole [`Response`] (Produce with acks=0 sends none; Fetch
/// frames its own zero-copy response), its throttle time set by the entry.
macro_rules! registry {
    ($($variant:ident $min:literal..=$max:literal => $($raw:ident)? |$shard:ident, $req:pat_param, $call:ident| $body:expr,)*) => {
        /// (API, min version, max version, name for metrics) advertised and served.
        pub const APIS: &[(ApiKey, i16, i16, &str)] = &[
            $((ApiKey::$variant, $min, $max, stringify!($variant)),)*
        ];

        async fn dispatch(
            shard: &Rc<Shard>,
            request: Request,
            session: &Session,
            handler_time: &HandlerTime,
        ) -> Response {
            let call = Call {
                shard,
                handler_time,
                key: request.api_key,
                version: request.api_version,
                correlation_id: request.correlation_id(),
                client_id: request.header.client_id.as_deref().unwrap_or_default(),
                client_host: &session.client_host,
                session,
            };
            match request.body {
                $(RequestKind::$variant($req) => {
                    let ($shard, $call) = (shard, &call);
                    registry!(@place [$($raw)?] registry!(@respond $call, [$($raw)?] $body))
                })*
                other => {
                    // The version table only admits the APIs above; nothing else reaches here.
                    tracing::error!(api = ?call.key, "no handler for {:?}", std::mem::discriminant(&other));
                    Response::Close
                }
            }
        }
    };
    // Where a handler's future lives: a `raw` entry's (Produce, Fetch: the per-record paths)
    // in this future, every other's in a box of its own, so that this future — the task of
    // every request, copied when it is spawned — is as large as a produce's or a fetch's and
    // not as the largest handler's (the group and admin handlers' 3-5 KiB).
    (@place [raw] $respond:expr) => { $respond };
    (@place [$($kind:ident)?] $respond:expr) => { Box::pin(async move { $respond }).await };
    (@respond $call:ident, [raw] $body:expr) => { $body };
    (@respond $call:ident, [exempt] $body:expr) => {
        respond($call.key, $call.version, $call.correlation_id, &$body)
    };
    (@respond $call:ident, [] $body:expr) => {{
        let mut body = $body;
        body.throttle_time_ms = body.throttle_time_ms.max($call.request_throttle_ms());
        respond($call.key, $call.version, $call.correlation_id, &body)
    }};
}

registry! {
    Produce 3..=12 => raw |shard, req, call| {
        let acks = req.acks;
        let mut response = produce::handle(shard, call.session, call.client_id, req, call.version).await;
        if acks == 0 {
            // Kafka meters no request time for a produce it does not answer.
            Response::None
        } else {
            response.throttle_time_ms = response.throttle_time_ms.max(call.request_throttle_ms());
            respond(call.key, call.version, call.correlation_id, &response)
        }
    },
    InitProducerId 0..=5 => |shard, req, call| {
        init_producer_id::handle(shard, call.session, req, call.version).await
    },
    Fetch 4..=16 => raw |shard, req, call| {
        fetch::handle(shard, call.session, call.client_id, req, call.version, call.correlation_id, || {
            call.request_throttle_ms()
        })
        .await
    },
    ListOffsets 1..=7 => |shard, req, call| list_offsets::handle(shard, call.session, req, call.version).await,
    Metadata 0..=12 => |shard, req, call| metadata::handle(shard, call.session, req, call.version).await,
    ApiVersions 0..=3 => |shard, _, _call| {
        api_versions::handle(supported_versions(), &shard.metadata())
    },
    CreateTopics 2..=7 => |shard, req, call| create_topics::handle(shard, call.session, req).await,
    DeleteTopics 1..=5 => |shard, req, call| delete_topics::handle(shard, call.session, req, call.version).await,
    DescribeConfigs 1..=4 => |shard, req, call| describe_configs::handle(shard, call.session, req, call.version),
    AlterConfigs 0..=2 => |shard, req, call| alter_configs::handle(shard, call.session, req).await,
    DeleteRecords 0..=2 => |shard, req, call| delete_records::handle(shard, call.session, req).await,
    CreatePartitions 0..=3 => |shard, req, call| create_partitions::handle(shard, call.session, req).await,
    IncrementalAlterConfigs 0..=1 => |shard, req, call| {
        incremental_alter_configs::handle(shard, call.session, req).await
    },
    DescribeCluster 0..=1 => |shard, req, call| describe_cluster::handle(shard, call.session, &req),
    FindCoordinator 0..=4 => |shard, req, call| {
        find_coordinator::handle(shard, call.session, req, call.version).await
    },
    JoinGroup 0..=9 => |shard, req, call| {
        join_group::handle(shard, call.session, req, call.version, call.client_id, call.client_host).await
    },
    SyncGroup 0..=5 => |shard, req, call| sync_group::handle(shard, call.session, req, call.version).await,
    Heartbeat 0..=4 => |shard, req, call| heartbeat::handle(shard, call.session, req).await,
    LeaveGroup 0..=5 => |shard, req, call| leave_group::handle(shard, call.session, req, call.version).await,
    OffsetCommit 2..=8 => |shard, req, call| offset_commit::handle(shard, call.session, req).await,
    OffsetFetch 1..=8 => |shard, req, call| offset_fetch::handle(shard, call.session, req, call.version).await,
    ListGroups 0..=4 => |shard, req, call| list_groups::handle(shard, call.session, req, call.version).await,
    DescribeGroups 0..=5 => |shard, req, call| {
        describe_groups::handle(shard, call.session, req, call.version).await
    },
    DeleteGroups 0..=2 => |shard, req, call| delete_groups::handle(shard, call.session, req).await,
    OffsetDelete 0..=0 => |shard, req, call| offset_delete::handle(shard, call.session, req).await,
    DescribeAcls 1..=3 => |shard, req, call| describe_acls::handle(shard, call.session, &req),
    CreateAcls 1..=3 => |shard, req, call| create_acls::handle(shard, call.session, &req).await,
    DeleteAcls 1..=3 => |shard, req, call| delete_acls::handle(shard, call.session, &req).await,
    ElectLeaders 0..=2 => |shard, req, call| elect_leaders::handle(shard, call.session, req, call.version).await,
    AlterPartitionReassignments 0..=1 => |shard, req, call| {
        alter_partition_reassignments::handle(shard, call.session, req, call.version).await
    },
    ListPartitionReassignments 0..=0 => |shard, req, call| {
        list_partition_reassignments::handle(shard, call.session, &req)
    },
    DescribeClientQuotas 0..=1 => |shard, req, call| {
        describe_client_quotas::handle(shard, call.session, &req)
    },
    AlterClientQuotas 0..=1 => |shard, req, call| {
        alter_client_quotas::handle(shard, call.session, req).await
    },
    DescribeUserScramCredentials 0..=0 => |shard, req, call| {
        describe_user_scram_credentials::handle(shard, call.session, &req)
    },
    AlterUserScramCredentials 0..=0 => |shard, req, call| {
        alter_user_scram_credentials::handle(shard, call.session, req).await
    },
    DescribeLogDirs 1..=4 => |shard, req, call| describe_log_dirs::handle(shard, call.session, req).await,
    OffsetForLeaderEpoch 2..=4 => |shard, req, call| {
        offset_for_leader_epoch::handle(shard, call.session, req).await
    },
    AddPartitionsToTxn 0..=5 => |shard, req, call| {
        add_partitions_to_txn::handle(shard, call.session, req, call.version).await
    },
    AddOffsetsToTxn 0..=4 => |shard, req, call| {
        add_offsets_to_txn::handle(shard, call.session, req, call.version).await
    },
    EndTxn 0..=5 => |shard, req, call| end_txn::handle(shard, call.session, req, call.version).await,
    // A cluster action: Kafka exempts it from the request quota.
    WriteTxnMarkers 1..=1 => exempt |shard, req, call| write_txn_markers::handle(shard, call.session, req).await,
    DescribeProducers 0..=0 => |shard, req, call| describe_producers::handle(shard, call.session, req).await,
    // A cluster action in Kafka's ApiKeys, and its response has no throttle time.
    DescribeQuorum 0..=2 => exempt |shard, req, call| {
        describe_quorum::handle(shard, call.session, &req, call.version).await
    },
    UnregisterBroker 0..=0 => |shard, req, call| unregister_broker::handle(shard, call.session, &req).await,
    AddRaftVoter 0..=0 => |shard, req, call| add_raft_voter::handle(shard, call.session, &req).await,
    RemoveRaftVoter 0..=0 => |shard, req, call| remove_raft_voter::handle(shard, call.session, &req).await,
    UpdateFeatures 0..=2 => |shard, req, call| {
        update_features::handle(shard, call.session, req, call.version).await
    },
    DescribeTopicPartitions 0..=0 => |shard, req, call| {
        describe_topic_partitions::handle(shard, call.session, &req)
    },
    TxnOffsetCommit 0..=5 => |shard, req, call| txn_offset_commit::handle(shard, call.session, req, call.version).await,
    DescribeTransactions 0..=0 => |shard, req, call| {
        describe_transactions::handle(shard, call.session, req).await
    },
    ListTransactions 0..=1 => |shard, req, call| {
        list_transactions::handle(shard, call.session, req, call.version).await
    },
    // The SASL exchange is exempt (on a SASL listener the authenticator answers it; these are
    // the answers out of it), and neither response has a throttle time.
    SaslHandshake 0..=1 => exempt |_shard, _, _call| sasl_handshake::handle(),
    SaslAuthenticate 0..=2 => exempt |_shard, _, _call| sasl_authenticate::handle(),
}

/// What a handler is told about its request besides the body.
struct Call<'a> {
    /// The shard serving it.
    shard: &'a Rc<Shard>,
    /// Its handler's time on the shard so far (what `request_percentage` meters).
    handler_time: &'a HandlerTime,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    /// The header's client id ("" when absent).
    client_id: &'a str,
    /// The client's address in Kafka's `/ip` form.
    client_host: &'a str,
    /// Who sends it (the principal requests are authorized as, `crate::authz`).
    session: &'a Session,
}

impl Call<'_> {
    /// Meters the request's handler time so far against the client's `request_percentage`
    /// (KIP-124; `crate::quotas`) and returns the throttle time for its response, ms (0 when
    /// within its quota or without one). Called once, when the response body is complete.
    fn request_throttle_ms(&self) -> i32 {
        self.shard.quota_meters.record(
            &self.shard.metadata.borrow().client_quotas,
            self.session,
            self.client_id,
            Metered::RequestTime,
            request_time_percent(self.handler_time.so_far()),
        )
    }
}

/// The broker's ApiVersions table.
pub fn supported_versions() -> &'static ApiVersionTable {
    static TABLE: OnceLock<ApiVersionTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = ApiVersionTable::new();
        for &(key, min, max, _) in APIS {
            table
                .insert(key, min, max)
                .expect("advertised versions are decodable by kafka-protocol");
        }
        table
    })
}

/// The name of `key` in metrics (the APIs of [`APIS`]).
fn api_name(key: ApiKey) -> &'static str {
    APIS.iter()
        .find(|(k, ..)| *k == key)
        .map_or("Other", |(.., name)| name)
}

/// Handles one decoded request from the client of `session` and records its latency in the
/// shard's metrics.
pub async fn handle(shard: &Rc<Shard>, request: Request, session: &Session) -> Response {
    let started = std::time::Instant::now();
    let key = request.api_key;
    let handler_time = HandlerTime::default();
    let response = handler_time
        .measure(dispatch(shard, request, session, &handler_time))
        .await;
    shard
        .metrics
        .record_latency(api_name(key), started.elapsed());
    response
}

fn respond<M: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &M) -> Response {
    match net::encode_response(key, version, correlation_id, body) {
        Ok(frame) => Response::Whole(frame),
        Err(e) => {
            tracing::error!(api = ?key, version, error = %e, "encoding response failed");
            Response::Close
        }
    }
}
