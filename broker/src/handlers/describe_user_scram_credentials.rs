//! DescribeUserScramCredentials (key 50), v0 (KIP-554), as Kafka's `KafkaApis` and
//! `ScramImage.describe`: DESCRIBE on the cluster is required (else the top-level error is
//! CLUSTER_AUTHORIZATION_FAILED); no users named: every user with a credential; else each
//! named user's mechanisms and iteration counts, RESOURCE_NOT_FOUND for one without any and
//! DUPLICATE_RESOURCE for one named twice. Read from this broker's metadata image.
//! `kafka-configs.sh --describe --entity-type users` sends it.

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use net::kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use replication::metadata::scram::{describe, ScramDescribeError};

pub fn handle(
    shard: &Shard,
    session: &Session,
    req: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let mut response = DescribeUserScramCredentialsResponse::default();
    if !authz::cluster(shard, session, AclOperation::Describe) {
        response.error_code = code(ResponseError::ClusterAuthorizationFailed);
        response.error_message = Some(str_bytes("Cluster authorization failed."));
        return response;
    }
    let users: Option<Vec<String>> = req
        .users
        .as_ref()
        .map(|u| u.iter().map(|n| n.name.to_string()).collect());
    let metadata = shard.metadata();
    response.results = describe(&metadata.scram_credentials, users.as_deref())
        .into_iter()
        .map(|(user, result)| {
            let mut out = DescribeUserScramCredentialsResult::default();
            out.user = str_bytes(user);
            match result {
                Ok(infos) => {
                    out.credential_infos = infos
                        .into_iter()
                        .map(|(mechanism, iterations)| {
                            let mut info = CredentialInfo::default();
                            info.mechanism = mechanism.wire_type();
                            info.iterations = iterations;
                            info
                        })
                        .collect();
                }
                Err(e) => {
                    out.error_code = code(match e {
                        ScramDescribeError::Duplicate(_) => ResponseError::DuplicateResource,
                        ScramDescribeError::NotFound(_) => ResponseError::ResourceNotFound,
                    });
                    out.error_message = Some(str_bytes(e.to_string()));
                }
            }
            out
        })
        .collect();
    response
}
