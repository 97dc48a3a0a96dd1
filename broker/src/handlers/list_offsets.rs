//! ListOffsets (key 2): latest (-1, the high watermark), earliest (-2, the log start offset),
//! max timestamp (-3, KIP-734), or the first offset whose timestamp is ≥ T (-1 when none).

use super::topic_name;
use crate::errors::code;
use crate::messages::{PartitionOp, PartitionReply};
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use net::kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use std::rc::Rc;
use storage::TopicPartition;

/// First ListOffsets version whose response carries the leader epoch.
const LEADER_EPOCH_VERSION: i16 = 4;

pub async fn handle(
    shard: &Rc<Shard>,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let mut response = ListOffsetsResponse::default();
    for topic in req.topics {
        let name = topic.name.0.to_string();
        let mut out = ListOffsetsTopicResponse::default();
        out.name = topic_name(&name);
        for p in topic.partitions {
            let tp = TopicPartition {
                topic: name.clone(),
                partition: p.partition_index,
            };
            let reply = shard
                .partition_call(
                    tp,
                    PartitionOp::ListOffsets {
                        timestamp: p.timestamp,
                    },
                )
                .await;
            let mut r = ListOffsetsPartitionResponse::default();
            r.partition_index = p.partition_index;
            match reply {
                PartitionReply::Offset { offset, timestamp } => {
                    r.offset = offset;
                    r.timestamp = timestamp;
                    if version >= LEADER_EPOCH_VERSION {
                        r.leader_epoch = 0;
                    }
                }
                PartitionReply::Error(error) => {
                    r.error_code = error;
                    r.offset = -1;
                    r.timestamp = -1;
                }
                other => {
                    tracing::error!(?other, "unexpected reply to list offsets");
                    r.error_code = code(ResponseError::UnknownServerError);
                }
            }
            out.partitions.push(r);
        }
        response.topics.push(out);
    }
    response
}
