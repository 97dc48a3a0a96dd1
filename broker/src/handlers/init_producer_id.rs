//! InitProducerId (key 22): a new idempotent-producer id with epoch 0, or — when the client
//! names its current id and epoch (v3+, KIP-360) — the same id with the epoch bumped, which
//! fences the older epoch. There is no transaction coordinator yet: a request with a
//! transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (a non-retriable
//! error, so clients fail at once rather than retrying), and the coordinator's APIs
//! (AddPartitionsToTxn, EndTxn, ...) are not advertised; the partition side (transactional
//! batches, WriteTxnMarkers, read_committed, DescribeProducers) is served.

use crate::errors::{code, controller_error};
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use std::rc::Rc;

pub async fn handle(shard: &Rc<Shard>, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    if req.transactional_id.is_some() {
        response.error_code = code(ResponseError::TransactionalIdAuthorizationFailed);
        return response;
    }
    if req.producer_id.0 >= 0 {
        // Re-initialisation of a known producer: next epoch, same id (epoch wraps like Kafka's
        // exhaustion handling would hand out a new id; here a new id is allocated instead).
        if req.producer_epoch < i16::MAX - 1 && req.producer_epoch >= 0 {
            response.producer_id = req.producer_id;
            response.producer_epoch = req.producer_epoch + 1;
            return response;
        }
    }
    match crate::controller::allocate_producer_id(shard).await {
        Ok(id) => {
            response.producer_id = ProducerId(id);
            response.producer_epoch = 0;
        }
        Err(e) => {
            tracing::warn!(error = %e, "InitProducerId failed");
            response.error_code = controller_error(&e).0;
        }
    }
    response
}
