//! AlterClientQuotas (key 49), v0–1 (KIP-546), as Kafka's `ControllerApis`: ALTER_CONFIGS on
//! the cluster is required (else every entry answers CLUSTER_AUTHORIZATION_FAILED); the
//! active controller checks each entity and its changes and stores them as
//! `ClientQuotaRecord`s (`ControllerOp::AlterClientQuotas`; a broker that is not the
//! controller forwards). `kafka-configs.sh --alter --entity-type users|clients` sends it.

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use net::kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use replication::metadata::quotas::QuotaValue;
use replication::metadata::{ControllerAnswer, ControllerOp};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let results: Vec<Result<(), (i16, String)>> = if !authz::cluster(
        shard,
        session,
        AclOperation::AlterConfigs,
    ) {
        let denied = (
            code(ResponseError::ClusterAuthorizationFailed),
            String::new(),
        );
        vec![Err(denied); req.entries.len()]
    } else {
        let entries = req
            .entries
            .iter()
            .map(|e| {
                let entity = e
                    .entity
                    .iter()
                    .map(|d| {
                        (
                            d.entity_type.to_string(),
                            d.entity_name.as_ref().map(|n| n.to_string()),
                        )
                    })
                    .collect();
                let changes = e
                    .ops
                    .iter()
                    .map(|o| {
                        (
                            o.key.to_string(),
                            (!o.remove).then_some(QuotaValue(o.value)),
                        )
                    })
                    .collect();
                (entity, changes)
            })
            .collect();
        let op = ControllerOp::AlterClientQuotas {
            entries,
            validate_only: req.validate_only,
        };
        match crate::controller::call_answer(shard, op).await {
            Ok(ControllerAnswer::AlterClientQuotas { results }) => results
                .into_iter()
                .map(|r| r.map_err(|m| (code(ResponseError::InvalidRequest), m)))
                .collect(),
            Ok(other) => {
                tracing::warn!(answer = ?other, "AlterClientQuotas: unexpected controller answer");
                let e = (code(ResponseError::UnknownServerError), String::new());
                vec![Err(e); req.entries.len()]
            }
            Err(e) => vec![Err(controller_error(&e)); req.entries.len()],
        }
    };
    let mut response = AlterClientQuotasResponse::default();
    response.entries = req
        .entries
        .iter()
        .zip(results)
        .map(|(e, result)| {
            let mut out = EntryData::default();
            out.entity = e
                .entity
                .iter()
                .map(|d| {
                    let mut o = EntityData::default();
                    o.entity_type = d.entity_type.clone();
                    o.entity_name = d.entity_name.clone();
                    o
                })
                .collect();
            if let Err((error_code, message)) = result {
                out.error_code = error_code;
                out.error_message = (!message.is_empty()).then(|| str_bytes(&message));
            }
            out
        })
        .collect();
    response
}
