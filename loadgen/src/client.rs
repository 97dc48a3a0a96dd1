//! The Kafka client side: librdkafka configurations of loadgen's producers and consumers, the
//! producer's delivery counter, and topic creation through the admin API.
//!
//! The transactions scenario's producers are transactional (`transactional.id`, KIP-98) and
//! every consumer reads with `isolation.level=read_committed` (librdkafka's default, set
//! explicitly because that scenario's latency is measured to the committed read).
//!
//! Settings that matter for latency are set explicitly rather than left to librdkafka's
//! defaults: `linger.ms` (default 5 ms, which alone would dominate a 1 ms target) and
//! `socket.nagle.disable=true` (Nagle's algorithm can hold a small request back until the
//! previous one is acknowledged).

use crate::latency::{self, Window};
use crate::payload::Stamp;
use crate::scenario::Params;
use crate::schedule::Clock;
use anyhow::{bail, Context as _};
use hdrhistogram::Histogram;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Duration;

/// Time allowed for metadata and admin requests.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// A produced record not acknowledged within this time fails (`message.timeout.ms`).
const MESSAGE_TIMEOUT_MS: u32 = 30_000;
/// How long the producer sleeps when librdkafka's queue is full.
const QUEUE_FULL_BACKOFF: Duration = Duration::from_millis(1);

/// Delivery outcomes shared by every producer of a run, and the acknowledgement latency
/// (intended send time → delivery report) of the records intended inside the window: the
/// produce half of the end-to-end latency.
pub struct DeliveryCounts {
    pub acked: AtomicU64,
    pub failed: AtomicU64,
    first_error_reported: AtomicBool,
    clock: Clock,
    /// Set once the measured window is known; acks are timed from then on.
    pub window: OnceLock<Window>,
    /// Only the producer threads (inside `poll`) record; the monitor reads at the end.
    pub ack_latency: Mutex<Histogram<u64>>,
}

impl DeliveryCounts {
    pub fn new(clock: Clock) -> DeliveryCounts {
        DeliveryCounts {
            acked: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            first_error_reported: AtomicBool::new(false),
            clock,
            window: OnceLock::new(),
            ack_latency: Mutex::new(latency::new_histogram()),
        }
    }

    fn record_ack(&self, value: Option<&[u8]>) {
        let (Some(window), Some(stamp)) = (self.window.get(), value.and_then(Stamp::read_from))
        else {
            return;
        };
        if stamp.intended_ns >= window.start_ns && stamp.intended_ns < window.end_ns {
            let us = latency::latency_us(stamp.intended_ns, self.clock.now_ns());
            if let Ok(mut h) = self.ack_latency.lock() {
                h.saturating_record(us);
            }
        }
    }
}

/// Producer context: counts delivery reports; the first failure is printed, later ones only
/// counted. It also counts this producer's own reports, and wakes the one thread that may wait
/// for them (`wait_for_reports`).
pub struct CountingContext {
    pub counts: Arc<DeliveryCounts>,
    /// Delivery reports of this producer, delivered or failed.
    reports: AtomicU64,
    /// The thread waiting in `wait_for_reports`, set by its first call.
    waiter: OnceLock<Thread>,
}

impl CountingContext {
    pub fn new(counts: Arc<DeliveryCounts>) -> CountingContext {
        CountingContext {
            counts,
            reports: AtomicU64::new(0),
            waiter: OnceLock::new(),
        }
    }

    /// Parks the calling thread until this producer has had `reports` delivery reports or
    /// `timeout` passed; true when it has. Only one thread may ever wait on a producer.
    pub fn wait_for_reports(&self, reports: u64, timeout: Duration) -> bool {
        let me = self.waiter.get_or_init(std::thread::current);
        assert_eq!(
            me.id(),
            std::thread::current().id(),
            "one thread waits for a producer's reports"
        );
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if self.reports.load(Ordering::Acquire) >= reports {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            // An unpark between the load and here makes this park return at once.
            std::thread::park_timeout(deadline - now);
        }
    }
}

impl ClientContext for CountingContext {}

impl ProducerContext for CountingContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _opaque: ()) {
        match result {
            Ok(message) => {
                self.counts.acked.fetch_add(1, Ordering::Relaxed);
                self.counts.record_ack(message.payload());
            }
            Err((error, _)) => {
                self.counts.failed.fetch_add(1, Ordering::Relaxed);
                if !self
                    .counts
                    .first_error_reported
                    .swap(true, Ordering::Relaxed)
                {
                    eprintln!("sluice-loadgen: a record was not delivered: {error}");
                }
            }
        }
        self.reports.fetch_add(1, Ordering::Release);
        if let Some(waiter) = self.waiter.get() {
            waiter.unpark();
        }
    }
}

/// A broker as loadgen's clients reach it: its bootstrap and the librdkafka properties
/// (`--client-config`, e.g. `security.protocol=SASL_SSL`, `ssl.ca.location`, `sasl.*`) that
/// every producer, consumer and admin client of it gets on top of loadgen's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub bootstrap: String,
    /// Applied last, in order: they override loadgen's settings.
    pub client_config: Vec<(String, String)>,
}

impl Endpoint {
    /// A broker reached with librdkafka's defaults (PLAINTEXT).
    pub fn plaintext(bootstrap: String) -> Endpoint {
        Endpoint {
            bootstrap,
            client_config: Vec::new(),
        }
    }

    /// The `security.protocol` the clients use, upper case as Kafka spells it (librdkafka's
    /// default PLAINTEXT when not configured).
    pub fn security_protocol(&self) -> String {
        self.client_config
            .iter()
            .rev()
            .find(|(key, _)| key == "security.protocol")
            .map_or_else(|| "PLAINTEXT".to_string(), |(_, v)| v.to_ascii_uppercase())
    }

    /// The value of a `--client-config` property, the last one given.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.client_config
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.bootstrap)
    }
}

fn common_config(endpoint: &Endpoint) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &endpoint.bootstrap)
        .set("client.id", "sluice-loadgen")
        .set("socket.nagle.disable", "true");
    for (key, value) in &endpoint.client_config {
        config.set(key, value);
    }
    config
}

/// A producer with the run's acks, batching and compression.
pub fn producer(
    endpoint: &Endpoint,
    params: &Params,
    counts: Arc<DeliveryCounts>,
) -> anyhow::Result<ThreadedProducer<CountingContext>> {
    producer_config(endpoint, params)
        .create_with_context(CountingContext::new(counts))
        .with_context(|| format!("creating a producer for {endpoint}"))
}

/// A transactional producer (`transactional.id` = `transactional_id`, idempotent, acks=all)
/// with the run's batching and compression, its transactions initialised (InitProducerId):
/// ready for `begin_transaction`.
pub fn transactional_producer(
    endpoint: &Endpoint,
    params: &Params,
    counts: Arc<DeliveryCounts>,
    transactional_id: &str,
) -> anyhow::Result<ThreadedProducer<CountingContext>> {
    let mut config = producer_config(endpoint, params);
    config.set("transactional.id", transactional_id);
    let producer: ThreadedProducer<CountingContext> = config
        .create_with_context(CountingContext::new(counts))
        .with_context(|| format!("creating a transactional producer for {endpoint}"))?;
    producer
        .init_transactions(REQUEST_TIMEOUT)
        .with_context(|| format!("init_transactions ({transactional_id}) on {endpoint}"))?;
    Ok(producer)
}

/// Sends one record, waiting while librdkafka's queue is full.
pub fn send<'a>(
    producer: &ThreadedProducer<CountingContext>,
    mut record: BaseRecord<'a, (), [u8]>,
    topic: &str,
) -> anyhow::Result<()> {
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                // Backpressure: the record is late, and its latency will say so.
                record = back;
                std::thread::sleep(QUEUE_FULL_BACKOFF);
            }
            Err((error, _)) => return Err(error).with_context(|| format!("producing to {topic}")),
        }
    }
}

/// The configuration shared by plain and transactional producers.
fn producer_config(endpoint: &Endpoint, params: &Params) -> ClientConfig {
    let mut config = common_config(endpoint);
    config
        .set("acks", params.acks.as_config())
        .set("linger.ms", params.linger_ms.to_string())
        .set("batch.size", params.batch_bytes.to_string())
        .set("compression.type", params.compression.as_config())
        .set("enable.idempotence", params.idempotence.to_string())
        .set("message.timeout.ms", MESSAGE_TIMEOUT_MS.to_string());
    config
}

/// A consumer of `group_id` that reads `topic` from the beginning: by joining the group
/// (`subscribe()`), or with `--assign` by `assign()`ing `partitions` (no group coordinator).
pub fn consumer(
    endpoint: &Endpoint,
    params: &Params,
    group_id: &str,
    topic: &str,
    partitions: &[i32],
) -> anyhow::Result<BaseConsumer> {
    let mut config = common_config(endpoint);
    config
        .set("group.id", group_id)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        .set("isolation.level", "read_committed");
    let consumer: BaseConsumer = config
        .create()
        .with_context(|| format!("creating a consumer for {endpoint}"))?;
    if params.subscribe {
        consumer
            .subscribe(&[topic])
            .with_context(|| format!("subscribing to {topic}"))?;
    } else {
        let mut assignment = TopicPartitionList::with_capacity(partitions.len());
        for &partition in partitions {
            assignment
                .add_partition_offset(topic, partition, Offset::Beginning)
                .with_context(|| format!("assigning {topic}-{partition}"))?;
        }
        consumer
            .assign(&assignment)
            .with_context(|| format!("assigning {} partitions of {topic}", partitions.len()))?;
    }
    Ok(consumer)
}

/// Creates `topic` with the run's partitions and configs (an existing topic is kept as it is)
/// and returns its partition count as the broker reports it.
pub fn create_topic(endpoint: &Endpoint, topic: &str, params: &Params) -> anyhow::Result<u32> {
    let admin: AdminClient<DefaultClientContext> = common_config(endpoint)
        .create()
        .with_context(|| format!("creating an admin client for {endpoint}"))?;
    let partitions = i32::try_from(params.partitions).context("--partitions too large")?;
    let segment_bytes = params.segment_bytes.to_string();
    let mut new_topic = NewTopic::new(
        topic,
        partitions,
        TopicReplication::Fixed(params.replication_factor),
    )
    .set("segment.bytes", &segment_bytes);
    for (key, value) in &params.topic_configs {
        new_topic = new_topic.set(key, value);
    }
    let options = AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT));
    let results = block_on(admin.create_topics([&new_topic], &options))
        .with_context(|| format!("CreateTopics {topic} on {endpoint}"))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => bail!("CreateTopics {name} on {endpoint}: {code}"),
        }
    }
    partition_count(admin.inner(), topic, endpoint)
}

/// Partitions of `topic` in the broker's metadata (waits until the topic shows up).
fn partition_count<C: ClientContext>(
    client: &rdkafka::client::Client<C>,
    topic: &str,
    endpoint: &Endpoint,
) -> anyhow::Result<u32> {
    let deadline = std::time::Instant::now() + REQUEST_TIMEOUT;
    loop {
        let metadata = client
            .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
            .with_context(|| format!("Metadata for {topic} from {endpoint}"))?;
        let found = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map(|t| t.partitions().len());
        match found {
            Some(n) if n > 0 => return u32::try_from(n).context("partition count"),
            _ if std::time::Instant::now() >= deadline => {
                bail!("{topic} has no partitions in {endpoint}'s metadata after creation")
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Runs a future to completion on this thread. rdkafka's admin futures are completed by the
/// admin client's own polling thread, so parking until woken is all an executor needs to do.
fn block_on<F: Future>(future: F) -> F::Output {
    struct ThreadWaker(Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        match future.as_mut().poll(&mut context) {
            Poll::Ready(output) => return output,
            Poll::Pending => std::thread::park(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(client_config: &[(&str, &str)]) -> Endpoint {
        Endpoint {
            bootstrap: "127.0.0.1:9092".into(),
            client_config: client_config
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn security_protocol_is_the_last_one_given_or_plaintext() {
        assert_eq!(endpoint(&[]).security_protocol(), "PLAINTEXT");
        let e = endpoint(&[
            ("security.protocol", "ssl"),
            ("ssl.ca.location", "/tmp/ca.pem"),
            ("security.protocol", "sasl_ssl"),
        ]);
        assert_eq!(e.security_protocol(), "SASL_SSL");
        assert_eq!(e.property("ssl.ca.location"), Some("/tmp/ca.pem"));
        assert_eq!(e.property("sasl.username"), None);
    }

    #[test]
    fn client_config_overrides_loadgen_settings() {
        let config = common_config(&endpoint(&[
            ("security.protocol", "SASL_SSL"),
            ("client.id", "mine"),
        ]));
        assert_eq!(config.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(config.get("client.id"), Some("mine"));
        assert_eq!(config.get("bootstrap.servers"), Some("127.0.0.1:9092"));
    }
}
