//! SaslHandshake (key 17), v0–1, once the connection is past authentication (after it on a
//! SASL listener, or on any other listener): ILLEGAL_SASL_STATE, as Kafka's
//! `KafkaApis.handleSaslHandshakeRequest` answers. Before authentication on a SASL listener
//! the connection's authenticator (`crate::sasl`) answers instead.

use crate::errors::code;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::SaslHandshakeResponse;

pub fn handle() -> SaslHandshakeResponse {
    let mut response = SaslHandshakeResponse::default();
    response.error_code = code(ResponseError::IllegalSaslState);
    response
}
