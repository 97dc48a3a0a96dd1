//! Request handlers, one file per Kafka API (STYLE.md): decode → check → delegate to the
//! owning shard(s) → encode. [`supported_versions`] is the one registry of what this broker
//! advertises in ApiVersions; only versions that are fully implemented are listed.

mod alter_configs;
mod api_versions;
mod authorized_operations;
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
mod elect_leaders;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod produce;
mod replica_assignment;
mod sync_group;

use crate::shard::Shard;
use bytes::Bytes;
use net::kafka_protocol::messages::{ApiKey, RequestKind};
use net::kafka_protocol::protocol::Encodable;
use net::{ApiVersionTable, Request};
use std::rc::Rc;
use std::sync::OnceLock;

/// (API, min version, max version, name for metrics) advertised and served.
const VERSIONS: &[(ApiKey, i16, i16, &str)] = &[
    (ApiKey::Produce, 3, 9, "Produce"),
    (ApiKey::InitProducerId, 0, 4, "InitProducerId"),
    (ApiKey::Fetch, 4, 12, "Fetch"),
    (ApiKey::ListOffsets, 1, 7, "ListOffsets"),
    (ApiKey::Metadata, 0, 12, "Metadata"),
    (ApiKey::ApiVersions, 0, 3, "ApiVersions"),
    (ApiKey::CreateTopics, 2, 7, "CreateTopics"),
    (ApiKey::DeleteTopics, 1, 5, "DeleteTopics"),
    (ApiKey::DescribeConfigs, 1, 4, "DescribeConfigs"),
    (ApiKey::AlterConfigs, 0, 2, "AlterConfigs"),
    (ApiKey::DeleteRecords, 0, 2, "DeleteRecords"),
    (ApiKey::CreatePartitions, 0, 3, "CreatePartitions"),
    (
        ApiKey::IncrementalAlterConfigs,
        0,
        1,
        "IncrementalAlterConfigs",
    ),
    (ApiKey::DescribeCluster, 0, 1, "DescribeCluster"),
    (ApiKey::FindCoordinator, 0, 4, "FindCoordinator"),
    (ApiKey::JoinGroup, 0, 9, "JoinGroup"),
    (ApiKey::SyncGroup, 0, 5, "SyncGroup"),
    (ApiKey::Heartbeat, 0, 4, "Heartbeat"),
    (ApiKey::LeaveGroup, 0, 5, "LeaveGroup"),
    (ApiKey::OffsetCommit, 2, 8, "OffsetCommit"),
    (ApiKey::OffsetFetch, 1, 8, "OffsetFetch"),
    (ApiKey::ListGroups, 0, 4, "ListGroups"),
    (ApiKey::DescribeGroups, 0, 5, "DescribeGroups"),
    (ApiKey::DeleteGroups, 0, 2, "DeleteGroups"),
    (ApiKey::OffsetDelete, 0, 0, "OffsetDelete"),
    (ApiKey::DescribeAcls, 1, 3, "DescribeAcls"),
    (ApiKey::CreateAcls, 1, 3, "CreateAcls"),
    (ApiKey::DeleteAcls, 1, 3, "DeleteAcls"),
    (ApiKey::ElectLeaders, 0, 2, "ElectLeaders"),
    (
        ApiKey::ListPartitionReassignments,
        0,
        0,
        "ListPartitionReassignments",
    ),
    (ApiKey::DescribeClientQuotas, 0, 1, "DescribeClientQuotas"),
    (ApiKey::DescribeLogDirs, 1, 4, "DescribeLogDirs"),
];

/// The broker's ApiVersions table.
pub fn supported_versions() -> &'static ApiVersionTable {
    static TABLE: OnceLock<ApiVersionTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = ApiVersionTable::new();
        for &(key, min, max, _) in VERSIONS {
            table
                .insert(key, min, max)
                .expect("advertised versions are decodable by kafka-protocol");
        }
        table
    })
}

/// What a handler gives the connection.
pub enum Response {
    /// The response frame, as chunks to write in order.
    Frame(Vec<Bytes>),
    /// No response, as the protocol says (Produce with acks=0).
    None,
    /// The response could not be built: close the connection rather than leave the client
    /// waiting for a correlation id that will never come.
    Close,
}

/// The name of `key` in metrics (the APIs of [`VERSIONS`]).
fn api_name(key: ApiKey) -> &'static str {
    VERSIONS
        .iter()
        .find(|(k, ..)| *k == key)
        .map_or("Other", |(.., name)| name)
}

/// Handles one decoded request from a client at `client_host` (Kafka's `/ip` form) and
/// records its latency in the shard's metrics.
pub async fn handle(shard: &Rc<Shard>, request: Request, client_host: &str) -> Response {
    let started = std::time::Instant::now();
    let key = request.api_key;
    let response = dispatch(shard, request, client_host).await;
    shard
        .metrics
        .record_latency(api_name(key), started.elapsed());
    response
}

async fn dispatch(shard: &Rc<Shard>, request: Request, client_host: &str) -> Response {
    let (key, version, correlation_id) = (
        request.api_key,
        request.api_version,
        request.correlation_id(),
    );
    match request.body {
        RequestKind::ApiVersions(_) => {
            respond(key, version, correlation_id, &api_versions::handle())
        }
        RequestKind::Metadata(req) => respond(
            key,
            version,
            correlation_id,
            &metadata::handle(shard, req, version).await,
        ),
        RequestKind::CreateTopics(req) => respond(
            key,
            version,
            correlation_id,
            &create_topics::handle(shard, req).await,
        ),
        RequestKind::DeleteTopics(req) => respond(
            key,
            version,
            correlation_id,
            &delete_topics::handle(shard, req, version).await,
        ),
        RequestKind::CreatePartitions(req) => respond(
            key,
            version,
            correlation_id,
            &create_partitions::handle(shard, req).await,
        ),
        RequestKind::DescribeConfigs(req) => respond(
            key,
            version,
            correlation_id,
            &describe_configs::handle(shard, req, version),
        ),
        RequestKind::AlterConfigs(req) => respond(
            key,
            version,
            correlation_id,
            &alter_configs::handle(shard, req).await,
        ),
        RequestKind::DeleteRecords(req) => respond(
            key,
            version,
            correlation_id,
            &delete_records::handle(shard, req).await,
        ),
        RequestKind::IncrementalAlterConfigs(req) => respond(
            key,
            version,
            correlation_id,
            &incremental_alter_configs::handle(shard, req).await,
        ),
        RequestKind::DescribeCluster(req) => respond(
            key,
            version,
            correlation_id,
            &describe_cluster::handle(shard, &req),
        ),
        RequestKind::Produce(req) => {
            let acks = req.acks;
            let response = produce::handle(shard, req).await;
            if acks == 0 {
                return Response::None;
            }
            respond(key, version, correlation_id, &response)
        }
        RequestKind::Fetch(req) => fetch::handle(shard, req, version, correlation_id).await,
        RequestKind::InitProducerId(req) => respond(
            key,
            version,
            correlation_id,
            &init_producer_id::handle(shard, req).await,
        ),
        RequestKind::ListOffsets(req) => respond(
            key,
            version,
            correlation_id,
            &list_offsets::handle(shard, req, version).await,
        ),
        RequestKind::FindCoordinator(req) => respond(
            key,
            version,
            correlation_id,
            &find_coordinator::handle(shard, req, version).await,
        ),
        RequestKind::JoinGroup(req) => respond(
            key,
            version,
            correlation_id,
            &join_group::handle(
                shard,
                req,
                version,
                request.header.client_id.as_deref().unwrap_or_default(),
                client_host,
            )
            .await,
        ),
        RequestKind::SyncGroup(req) => respond(
            key,
            version,
            correlation_id,
            &sync_group::handle(shard, req, version).await,
        ),
        RequestKind::Heartbeat(req) => respond(
            key,
            version,
            correlation_id,
            &heartbeat::handle(shard, req).await,
        ),
        RequestKind::LeaveGroup(req) => respond(
            key,
            version,
            correlation_id,
            &leave_group::handle(shard, req, version).await,
        ),
        RequestKind::OffsetCommit(req) => respond(
            key,
            version,
            correlation_id,
            &offset_commit::handle(shard, req).await,
        ),
        RequestKind::OffsetFetch(req) => respond(
            key,
            version,
            correlation_id,
            &offset_fetch::handle(shard, req, version).await,
        ),
        RequestKind::ListGroups(req) => respond(
            key,
            version,
            correlation_id,
            &list_groups::handle(shard, req, version).await,
        ),
        RequestKind::DescribeGroups(req) => respond(
            key,
            version,
            correlation_id,
            &describe_groups::handle(shard, req, version).await,
        ),
        RequestKind::DeleteGroups(req) => respond(
            key,
            version,
            correlation_id,
            &delete_groups::handle(shard, req).await,
        ),
        RequestKind::OffsetDelete(req) => respond(
            key,
            version,
            correlation_id,
            &offset_delete::handle(shard, req).await,
        ),
        RequestKind::DescribeAcls(_) => {
            respond(key, version, correlation_id, &describe_acls::handle())
        }
        RequestKind::CreateAcls(req) => {
            respond(key, version, correlation_id, &create_acls::handle(&req))
        }
        RequestKind::DeleteAcls(req) => {
            respond(key, version, correlation_id, &delete_acls::handle(&req))
        }
        RequestKind::ElectLeaders(req) => respond(
            key,
            version,
            correlation_id,
            &elect_leaders::handle(shard, req),
        ),
        RequestKind::ListPartitionReassignments(_) => respond(
            key,
            version,
            correlation_id,
            &list_partition_reassignments::handle(),
        ),
        RequestKind::DescribeLogDirs(req) => respond(
            key,
            version,
            correlation_id,
            &describe_log_dirs::handle(shard, req).await,
        ),
        RequestKind::DescribeClientQuotas(_) => respond(
            key,
            version,
            correlation_id,
            &describe_client_quotas::handle(),
        ),
        other => {
            // The version table only admits the APIs above; anything else cannot reach here.
            tracing::error!(api = ?key, "no handler for {:?}", std::mem::discriminant(&other));
            Response::Close
        }
    }
}

fn respond<M: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &M) -> Response {
    match net::encode_response(key, version, correlation_id, body) {
        Ok(frame) => Response::Frame(vec![frame]),
        Err(e) => {
            tracing::error!(api = ?key, version, error = %e, "encoding response failed");
            Response::Close
        }
    }
}

/// A topic name as the protocol carries it.
pub fn topic_name(name: &str) -> net::kafka_protocol::messages::TopicName {
    net::kafka_protocol::messages::TopicName(net::kafka_protocol::protocol::StrBytes::from_string(
        name.to_string(),
    ))
}

/// A protocol string from a Rust one.
pub fn str_bytes(s: impl Into<String>) -> net::kafka_protocol::protocol::StrBytes {
    net::kafka_protocol::protocol::StrBytes::from_string(s.into())
}
