//! DeleteRecords (key 21), v0–2 (KIP-107): moves each partition's log start offset forward to
//! the requested offset (-1: the high watermark) on the partition's owning shard; closed
//! segments wholly below it are deleted and reads below it fail with `OFFSET_OUT_OF_RANGE`.
//! The answer's `low_watermark` is the new log start offset. With one broker the new log
//! start is durable (checkpointed) when the shard answers, so `timeout_ms` is never waited on.
//!
//! Errors per partition, as Kafka answers: an offset above the high watermark or negative
//! (other than -1) → `OFFSET_OUT_OF_RANGE`; an unknown partition →
//! `UNKNOWN_TOPIC_OR_PARTITION`; the internal `__consumer_offsets` → `INVALID_TOPIC_EXCEPTION`
//! ("Cannot delete records of internal topic").

use super::wire::topic_name;
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error, partition_op_error_code};
use crate::partitions::{PartitionOp, PartitionReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use net::kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use replication::metadata::{check_not_internal, TopicOperation};
use std::rc::Rc;
use storage::{Offset, TopicPartition};

/// The request's `offset` meaning "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut response = DeleteRecordsResponse::default();
    let metadata = shard.metadata();
    for topic in req.topics {
        let name = topic.name.0.to_string();
        let internal = check_not_internal(&metadata, &name, TopicOperation::DeleteRecords)
            .err()
            .map(|e| controller_error(&e).0);
        // Kafka: DELETE on the topic (`crate::authz`), checked first.
        let internal = if authz::topic(shard, session, AclOperation::Delete, &name) {
            internal
        } else {
            Some(code(ResponseError::TopicAuthorizationFailed))
        };
        let mut out = DeleteRecordsTopicResult::default();
        out.name = topic_name(&name);
        for p in topic.partitions {
            let mut r = DeleteRecordsPartitionResult::default();
            r.partition_index = p.partition_index;
            r.low_watermark = -1;
            if let Some(error) = internal {
                r.error_code = error;
                out.partitions.push(r);
                continue;
            }
            let tp = TopicPartition {
                topic: name.clone(),
                partition: p.partition_index,
            };
            let before = (p.offset != HIGH_WATERMARK).then_some(Offset(p.offset));
            let reply = crate::partitions::service::call(
                shard,
                tp,
                PartitionOp::DeleteRecordsBefore { before },
            )
            .await;
            match reply {
                PartitionReply::LogStart { log_start_offset } => {
                    r.low_watermark = log_start_offset;
                }
                PartitionReply::Error(error) => r.error_code = partition_op_error_code(&error),
                other => {
                    tracing::error!(?other, "unexpected reply to delete records");
                    r.error_code = code(ResponseError::UnknownServerError);
                }
            }
            out.partitions.push(r);
        }
        response.topics.push(out);
    }
    response
}
