//! Small conversions the handlers share to build protocol values.

/// A topic name as the protocol carries it.
pub fn topic_name(name: &str) -> net::kafka_protocol::messages::TopicName {
    net::kafka_protocol::messages::TopicName(net::kafka_protocol::protocol::StrBytes::from_string(
        name.to_string(),
    ))
}

/// A protocol string from a Rust one.
pub fn str_bytes(s: impl Into<String>) -> net::kafka_protocol::protocol::StrBytes {
    net::kafka_protocol::protocol::StrBytes::from_string(s.into())
}
