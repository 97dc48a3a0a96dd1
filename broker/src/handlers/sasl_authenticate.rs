//! SaslAuthenticate (key 36), v0–2, once the connection is past authentication:
//! ILLEGAL_SASL_STATE with Kafka's message (`KafkaApis.handleSaslAuthenticateRequest`).
//! Before authentication on a SASL listener the connection's authenticator (`crate::sasl`)
//! answers instead.

use super::wire::str_bytes;
use crate::errors::code;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::SaslAuthenticateResponse;

pub fn handle() -> SaslAuthenticateResponse {
    let mut response = SaslAuthenticateResponse::default();
    response.error_code = code(ResponseError::IllegalSaslState);
    response.error_message = Some(str_bytes(
        "SaslAuthenticate request received after successful authentication",
    ));
    response
}
