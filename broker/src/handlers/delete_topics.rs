//! DeleteTopics (key 20), v1–5 (topics by name; v6 topic ids are not served). The controller
//! drops the topic from the metadata and every owning shard discards the partition logs and
//! renames their directories out of the way before the answer (removing them in the
//! background), so a topic re-created under the same name starts empty at offset 0.

use super::wire::{str_bytes, topic_name};
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use net::kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use replication::metadata::{check_not_internal, ControllerOp, TopicOperation};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// First version whose results carry `error_message`.
const ERROR_MESSAGE_MIN_VERSION: i16 = 5;

/// Outcome of deleting one topic: Kafka's error code and message, or success.
type Outcome = Result<(), (i16, String)>;

/// Deletes each named topic through the controller and answers per topic. Names refused
/// outright (given twice, internal, unknown) are answered at once. The deletions run in a task
/// of their own; the answer waits at most the request's `timeout_ms`: topics not deleted by
/// then get `REQUEST_TIMED_OUT` while their deletion goes on, and a `timeout_ms` ≤ 0 triggers
/// the deletions and answers at once (the protocol's "return immediately"), so the request is
/// answered whatever state the partitions are in.
pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let names: Vec<String> = req.topic_names.iter().map(|n| n.0.to_string()).collect();
    let outcomes: Rc<RefCell<Vec<Option<Outcome>>>> =
        Rc::new(RefCell::new(refused_outright(shard, session, &names)));
    let deleted = spawn_deletions(shard, &names, &outcomes);
    let deleted = async {
        let _ = deleted.await;
    };
    let triggered_only = match u64::try_from(req.timeout_ms) {
        Ok(ms) if ms > 0 => {
            let timeout = crate::rt::sleep(Duration::from_millis(ms));
            futures_lite::future::or(deleted, timeout).await;
            false
        }
        _ => true,
    };
    let outcomes = outcomes.borrow();
    answer(&names, &outcomes, triggered_only, version)
}

/// The outcome of each of `names` refused outright (given twice, internal, unknown); none for
/// a name to delete.
fn refused_outright(shard: &Shard, session: &Session, names: &[String]) -> Vec<Option<Outcome>> {
    // Kafka refuses a name given twice in one request (INVALID_REQUEST for each copy).
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for name in names {
        *seen.entry(name.as_str()).or_default() += 1;
    }
    let metadata = shard.metadata();
    let refused = |name: &String| -> Option<Outcome> {
        if seen.get(name.as_str()).copied().unwrap_or(0) > 1 {
            Some(Err((
                code(ResponseError::InvalidRequest),
                format!("topic '{name}' is named more than once in the request"),
            )))
        } else if !authz::topic(shard, session, AclOperation::Delete, name) {
            // Kafka: DELETE on the topic (`crate::authz`).
            Some(Err((
                code(ResponseError::TopicAuthorizationFailed),
                "Authorization failed.".to_string(),
            )))
        } else if let Err(e) = check_not_internal(&metadata, name, TopicOperation::Delete) {
            // Deleting it would lose every group's committed offsets under the coordinator.
            Some(Err(controller_error(&e)))
        } else if !metadata.topics.contains_key(name) {
            Some(Err((
                code(ResponseError::UnknownTopicOrPartition),
                format!("topic '{name}' does not exist"),
            )))
        } else {
            None
        }
    };
    names.iter().map(refused).collect()
}

/// Deletes, one at a time through the controller, each of `names` whose outcome is still none,
/// in a detached task (the deletions go on after a timed-out answer); the receiver completes
/// when all are done.
fn spawn_deletions(
    shard: &Rc<Shard>,
    names: &[String],
    outcomes: &Rc<RefCell<Vec<Option<Outcome>>>>,
) -> futures_channel::oneshot::Receiver<()> {
    let (done, deleted) = futures_channel::oneshot::channel::<()>();
    let (shard, names, outcomes) = (shard.clone(), names.to_vec(), outcomes.clone());
    // Detached: the deletions go on after a timed-out answer.
    crate::rt::spawn_local(async move {
        for (i, name) in names.into_iter().enumerate() {
            if outcomes.borrow()[i].is_some() {
                continue;
            }
            let outcome = crate::controller::call(&shard, ControllerOp::DeleteTopic { name })
                .await
                .map_err(|e| controller_error(&e));
            outcomes.borrow_mut()[i] = Some(outcome);
        }
        let _ = done.send(());
    })
    .detach();
    deleted
}

/// The answer: each topic's outcome; one still deleting is a success when the request only
/// triggered the deletions (`triggered_only`), else REQUEST_TIMED_OUT.
fn answer(
    names: &[String],
    outcomes: &[Option<Outcome>],
    triggered_only: bool,
    version: i16,
) -> DeleteTopicsResponse {
    let mut response = DeleteTopicsResponse::default();
    for (name, outcome) in names.iter().zip(outcomes.iter()) {
        let outcome = match outcome.clone() {
            Some(outcome) => outcome,
            None if triggered_only => Ok(()),
            None => Err((
                code(ResponseError::RequestTimedOut),
                format!("topic '{name}' is still being deleted after the request's timeout"),
            )),
        };
        let mut result = DeletableTopicResult::default();
        result.name = Some(topic_name(name));
        if let Err((error, message)) = outcome {
            result.error_code = error;
            if version >= ERROR_MESSAGE_MIN_VERSION {
                result.error_message = Some(str_bytes(message));
            }
        }
        response.responses.push(result);
    }
    response
}
