//! AlterUserScramCredentials (key 51), v0 (KIP-554), as Kafka's `ControllerApis`: ALTER on
//! the cluster is required (else every user answers CLUSTER_AUTHORIZATION_FAILED); the active
//! controller checks each user's deletion or upsertion and stores the credential (the keys
//! derived from the client's salted password, never the password) as
//! `UserScramCredentialRecord`s (`ControllerOp::AlterUserScramCredentials`; a broker that is
//! not the controller forwards). `kafka-configs.sh --alter --add-config
//! 'SCRAM-SHA-256=[password=…]' --entity-type users` sends it.

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use net::kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use replication::metadata::scram::{ScramAlterError, ScramUpsertion};
use replication::metadata::{ControllerAnswer, ControllerOp};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let deletions: Vec<(String, i8)> = req
        .deletions
        .iter()
        .map(|d| (d.name.to_string(), d.mechanism))
        .collect();
    let upsertions: Vec<ScramUpsertion> = req
        .upsertions
        .iter()
        .map(|u| ScramUpsertion {
            name: u.name.to_string(),
            mechanism: u.mechanism,
            iterations: u.iterations,
            salt: u.salt.to_vec(),
            salted_password: u.salted_password.to_vec(),
        })
        .collect();
    // Every user the request names, once (what a request-wide error answers).
    let mut users: Vec<String> = Vec::new();
    for name in deletions
        .iter()
        .map(|(n, _)| n)
        .chain(upsertions.iter().map(|u| &u.name))
    {
        if !users.contains(name) {
            users.push(name.clone());
        }
    }
    let all = |error: (i16, String)| -> Vec<(String, i16, String)> {
        users
            .iter()
            .map(|u| (u.clone(), error.0, error.1.clone()))
            .collect()
    };
    let results = if !authz::cluster(shard, session, AclOperation::Alter) {
        all((
            code(ResponseError::ClusterAuthorizationFailed),
            String::new(),
        ))
    } else {
        let op = ControllerOp::AlterUserScramCredentials {
            deletions,
            upsertions,
        };
        match crate::controller::call_answer(shard, op).await {
            Ok(ControllerAnswer::AlterUserScramCredentials { results }) => results
                .into_iter()
                .map(|(user, result)| match result {
                    Ok(()) => (user, 0, String::new()),
                    Err(e) => (user, alter_error_code(&e), e.to_string()),
                })
                .collect(),
            Ok(other) => {
                tracing::warn!(answer = ?other, "AlterUserScramCredentials: unexpected controller answer");
                all((code(ResponseError::UnknownServerError), String::new()))
            }
            Err(e) => all(controller_error(&e)),
        }
    };
    let mut response = AlterUserScramCredentialsResponse::default();
    response.results = results
        .into_iter()
        .map(|(user, error_code, message)| {
            let mut out = AlterUserScramCredentialsResult::default();
            out.user = str_bytes(user);
            out.error_code = error_code;
            out.error_message = (!message.is_empty()).then(|| str_bytes(&message));
            out
        })
        .collect();
    response
}

/// Kafka's error code of a refused alteration.
fn alter_error_code(e: &ScramAlterError) -> i16 {
    code(match e {
        ScramAlterError::Duplicate => ResponseError::DuplicateResource,
        ScramAlterError::NotFound => ResponseError::ResourceNotFound,
        ScramAlterError::Unacceptable(_) => ResponseError::UnacceptableCredential,
        ScramAlterError::UnknownMechanism => ResponseError::UnsupportedSaslMechanism,
    })
}
