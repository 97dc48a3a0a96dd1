//! Finding a topic in the image, and the internal-topic check: shared by the topic, config
//! and election proposers.

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
