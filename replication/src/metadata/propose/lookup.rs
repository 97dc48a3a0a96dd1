//! Finding a topic in the image, the internal-topic check and whether a topic may elect a
//! leader outside the ISR: shared by the topic, config, election and reassignment proposers.

use crate::metadata::image::{MetadataImage, TopicImage};
use crate::metadata::op::*;

/// Whether topic `name` is internal: its flag when it exists, else whether the name is
/// reserved for one ([`INTERNAL_TOPIC_NAMES`]).
pub fn is_internal(image: &MetadataImage, name: &str) -> bool {
    is_internal_topic(image.topics.get(name), name)
}

/// [`is_internal`] of topic `name` already looked up (`topic`: `None` when the image has
/// none).
fn is_internal_topic(topic: Option<&TopicImage>, name: &str) -> bool {
    topic.map_or_else(|| INTERNAL_TOPIC_NAMES.contains(&name), |t| t.internal)
}

/// The one check of every client operation a topic's internal flag forbids. Errors:
/// [`ControllerError::InternalTopic`].
pub fn check_not_internal(
    image: &MetadataImage,
    name: &str,
    operation: TopicOperation,
) -> Result<(), ControllerError> {
    check_topic_not_internal(image.topics.get(name), name, operation)
}

/// [`check_not_internal`] of topic `name` already looked up in the image (`topic`: `None`
/// when it has none), for a request that resolves each topic once.
pub fn check_topic_not_internal(
    topic: Option<&TopicImage>,
    name: &str,
    operation: TopicOperation,
) -> Result<(), ControllerError> {
    if is_internal_topic(topic, name) {
        return Err(ControllerError::InternalTopic {
            topic: name.to_string(),
            operation,
        });
    }
    Ok(())
}

/// Topic `name` of `image`. Errors: [`ControllerError::UnknownTopic`].
pub(super) fn existing<'a>(
    image: &'a MetadataImage,
    name: &str,
) -> Result<&'a TopicImage, ControllerError> {
    image
        .topics
        .get(name)
        .ok_or_else(|| ControllerError::UnknownTopic {
            topic: name.to_string(),
        })
}

/// Whether topic `topic` may elect a leader outside the ISR: its
/// [`UNCLEAN_LEADER_ELECTION_ENABLE`] override, else the cluster-wide dynamic broker config,
/// else false (Kafka's default; a per-broker or static value is not consulted).
pub(super) fn unclean_leader_election(image: &MetadataImage, topic: &TopicImage) -> bool {
    topic
        .configs
        .get(UNCLEAN_LEADER_ELECTION_ENABLE)
        .or_else(|| {
            image
                .broker_configs
                .get("")
                .and_then(|c| c.get(UNCLEAN_LEADER_ELECTION_ENABLE))
        })
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}
