//! JoinGroup (key 11), v0–9: admission to a group's next generation (the state machine is
//! `groups::group`). v0 has no rebalance timeout: the session timeout stands in. v4+
//! (KIP-394): a dynamic member's first join gets `MEMBER_ID_REQUIRED` with its id. v5+
//! carries `group.instance.id` (KIP-345); v7+ names the protocol type; v9 `skip_assignment`.

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::groups::group::{JoinParams, JoinedMember};
use crate::groups::{GroupOp, GroupReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use net::kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: JoinGroupRequest,
    version: i16,
    client_id: &str,
    client_host: &str,
) -> JoinGroupResponse {
    let mut response = JoinGroupResponse::default();
    response.generation_id = -1;
    response.member_id = req.member_id.clone();
    response.protocol_name = (version < 7).then(|| str_bytes(""));
    let group_id = req.group_id.0.to_string();
    if !authz::group(shard, session, AclOperation::Read, &group_id) {
        response.error_code = code(ResponseError::GroupAuthorizationFailed);
        return response;
    }
    if group_id.is_empty() {
        response.error_code = code(ResponseError::InvalidGroupId);
        return response;
    }
    let params = join_params(&req, version, client_id, client_host);
    let result = match crate::groups::service::call(shard, &group_id, GroupOp::Join(params)).await {
        GroupReply::Join(r) => r,
        GroupReply::Error(e) => {
            response.error_code = crate::errors::group_error_code(e);
            return response;
        }
        other => {
            tracing::error!(?other, "unexpected reply to JoinGroup");
            response.error_code = code(ResponseError::UnknownServerError);
            return response;
        }
    };
    response.error_code = result.error.map_or(0, crate::errors::group_error_code);
    response.generation_id = result.generation;
    response.member_id = str_bytes(result.member_id);
    response.leader = str_bytes(result.leader);
    response.protocol_type = result.protocol_type.map(str_bytes);
    response.protocol_name = match result.protocol_name {
        Some(name) => Some(str_bytes(name)),
        None if version < 7 => Some(str_bytes("")),
        None => None,
    };
    response.skip_assignment = version >= 9 && result.skip_assignment;
    response.members = result
        .members
        .into_iter()
        .map(|m| member_response(m, version))
        .collect();
    response
}

/// The coordinator's join parameters from the request, as `version` defines them.
fn join_params(
    req: &JoinGroupRequest,
    version: i16,
    client_id: &str,
    client_host: &str,
) -> JoinParams {
    let instance = req.group_instance_id.as_ref().map(|i| i.to_string());
    JoinParams {
        member_id: req.member_id.to_string(),
        require_known_member_id: version >= 4 && instance.is_none(),
        supports_skip_assignment: version >= 9,
        group_instance_id: instance,
        client_id: client_id.to_string(),
        client_host: client_host.to_string(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
    }
}

/// One member of the new generation, as the leader gets it (`group.instance.id` from v5).
fn member_response(m: JoinedMember, version: i16) -> JoinGroupResponseMember {
    let mut member = JoinGroupResponseMember::default();
    member.member_id = str_bytes(m.member_id);
    member.group_instance_id = if version >= 5 {
        m.group_instance_id.map(str_bytes)
    } else {
        None
    };
    member.metadata = m.metadata;
    member
}
