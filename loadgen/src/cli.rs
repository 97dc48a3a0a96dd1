//! Command-line flags (clap derive). Every scenario parameter is a flag; a flag left out takes
//! the scenario's documented default (see `scenario` and `sluice-loadgen --help`).

use clap::{Parser, ValueEnum};
use std::path::PathBuf;

/// The named workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScenarioName {
    /// Risk-control profile: 1 KiB records at a fixed 10,000 msg/s, acks=all, 6 partitions,
    /// 1 producer, 1 consumer group; coordinated-omission-corrected end-to-end latency.
    Latency,
    /// Maximum MB/s and msg/s: unlimited rate, batching (linger.ms=5, 1 MiB batches).
    Throughput,
    /// The latency profile read by 4 consumer groups at once.
    Fanout,
    /// 1,000 partitions, 10,000 msg/s spread over all of them, all consumed.
    Partitions,
    /// Produce 1 GiB first, then a fresh consumer reads it from the beginning (cold reads).
    Catchup,
    /// Any other scenario (`--soak-of`, default latency) for a long time (default 1 h) with a
    /// report line every `--report-every` seconds.
    Soak,
    /// The latency profile at rising rates (`--sweep-rates`, default 1k, 2k, 5k, 10k, 20k, …
    /// msg/s) until a broker no longer holds the rate: p50/p99/p99.99 and broker CPU against
    /// the achieved rate, one SVG line per broker.
    Sweep,
    /// A transactional producer, closed loop (the next transaction begins when the commit
    /// returns), `--records-per-txn` records per transaction over 3 partitions, read by a
    /// read_committed consumer: transactions/s, records/s and send → commit → receipt latency.
    Transactions,
    /// New connections per second: `--connections` (1,000) connections one after another,
    /// each connect → TLS handshake (with `security.protocol` SSL or SASL_SSL) → ApiVersions →
    /// close; connections/s and the broker's CPU per connection.
    Connect,
}

impl ScenarioName {
    /// The name on the command line and in the JSON result.
    pub fn name(self) -> &'static str {
        match self {
            ScenarioName::Latency => "latency",
            ScenarioName::Throughput => "throughput",
            ScenarioName::Fanout => "fanout",
            ScenarioName::Partitions => "partitions",
            ScenarioName::Catchup => "catchup",
            ScenarioName::Soak => "soak",
            ScenarioName::Sweep => "sweep",
            ScenarioName::Transactions => "transactions",
            ScenarioName::Connect => "connect",
        }
    }
}

/// `acks` of the producers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
pub enum Acks {
    #[value(name = "all")]
    #[serde(rename = "all")]
    All,
    #[value(name = "1")]
    #[serde(rename = "1")]
    Leader,
    #[value(name = "0")]
    #[serde(rename = "0")]
    None,
}

impl Acks {
    /// librdkafka's value of `acks`.
    pub fn as_config(self) -> &'static str {
        match self {
            Acks::All => "all",
            Acks::Leader => "1",
            Acks::None => "0",
        }
    }
}

/// `compression.type` of the producers (the codecs built into the bundled librdkafka).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
}

impl Compression {
    pub fn as_config(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "sluice-loadgen",
    version,
    about = "Benchmark Sluice (or any Kafka-API broker) through a real Kafka client (librdkafka).",
    long_about = "Benchmark Sluice (or any Kafka-API broker) through a real Kafka client (librdkafka).\n\n\
        With no --bootstrap it starts a temporary local `sluice` (its own data directory, port \
        and CPUs), runs the scenario, stops the broker and prints the result. With --bootstrap \
        it drives that broker; --compare runs the same scenario against a second one.\n\n\
        Outputs: live progress on a terminal, a final table, a JSON result file (--json), an \
        HdrHistogram interval log per broker and a latency-percentile SVG plot beside it.\n\n\
        Scenario defaults (any flag overrides):\n  \
        latency     rate 10000/s, 1024 B, 6 partitions, acks=all, linger.ms=0, 1 producer, 1 group, 30 s + 5 s warm-up\n  \
        throughput  unlimited rate, 1024 B, 6 partitions, acks=all, linger.ms=5, 1 MiB batches, 30 s + 5 s warm-up\n  \
        fanout      as latency, 4 consumer groups\n  \
        partitions  as latency over 1000 partitions, linger.ms=5, 2 MiB segments\n  \
        catchup     produce --catchup-bytes (1 GiB) unlimited, then one group reads it all from the start\n  \
        soak        --soak-of (latency) for 3600 s, a report line every 60 s\n  \
        sweep       latency at 1k, 2k, 5k, 10k, 20k, 50k, … msg/s until one is not held (95 %), 10 s + 2 s warm-up per step\n  \
        connect     --connections (1000) new connections one at a time: connect, TLS handshake (SSL, SASL_SSL), ApiVersions, close\n  \
        transactions  closed loop, --records-per-txn (10) records per transaction, 1024 B, 3 partitions, acks=all, linger.ms=0, 1 transactional producer, 1 read_committed group, 30 s + 5 s warm-up\n\n\
        Kafka beside Sluice: `scripts/kafka-ref start` prints Kafka's bootstrap and writes its pid to \
        target/kafka-ref/run/state.json; give them as --compare HOST:PORT --compare-pid PID.\n\n\
        Security: --client-config KEY=VALUE (librdkafka properties, e.g. security.protocol=SASL_SSL, \
        ssl.ca.location=ca.pem, sasl.mechanism=SCRAM-SHA-256, sasl.username, sasl.password) goes to \
        every client of the broker under test, --compare-client-config to those of the --compare \
        broker; the table and the JSON result record each broker's security.protocol.\n\n\
        Each group's consumers join it with subscribe() (the broker's group coordinator assigns \
        the partitions; no offset commits); --assign makes them assign() their share instead.\n\n\
        The floor (latency only; --no-floor skips it): after the broker(s), the same scenario runs \
        against `sluice-floor`, a minimal server on Sluice's runtime (glommio, io_uring) pinned \
        like the local broker, that does only a broker's per-record system work: read the Produce \
        request, one O_DIRECT write of the 4 KiB block(s) the batch touches in a preallocated \
        file (completed before the answer), answer, and answer the parked fetch from memory. Its \
        CPU per record and p50/p99/p99.99 are printed, and every broker's CPU per record and \
        latency as multiples of them. Its consumers assign() (the floor has no groups)."
)]
pub struct Cli {
    /// Scenario to run.
    #[arg(value_enum, default_value_t = ScenarioName::Latency)]
    pub scenario: ScenarioName,

    /// Broker to drive; without it a temporary local `sluice` is started.
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap: Option<String>,

    /// A second broker: the same scenario runs against it, figures are shown side by side.
    #[arg(long, value_name = "HOST:PORT")]
    pub compare: Option<String>,

    /// A librdkafka property for every client (producers, consumers, admin) of the broker
    /// under test, e.g. security.protocol=SASL_SSL, ssl.ca.location=FILE,
    /// sasl.mechanism=SCRAM-SHA-256, sasl.username=U, sasl.password=P; repeatable, applied
    /// after loadgen's own settings.
    #[arg(long, value_name = "KEY=VALUE")]
    pub client_config: Vec<String>,

    /// As --client-config, for the clients of the --compare broker [the --client-config
    /// properties when none is given].
    #[arg(long, value_name = "KEY=VALUE", requires = "compare")]
    pub compare_client_config: Vec<String>,

    /// connect: connections opened per broker [1000].
    #[arg(long)]
    pub connections: Option<u32>,

    /// Process id of the --bootstrap broker: its CPU and RSS are sampled as a local one's.
    #[arg(long, value_name = "PID", requires = "bootstrap")]
    pub bootstrap_pid: Option<u32>,

    /// Process id of the --compare broker (e.g. the Kafka of scripts/kafka-ref): its CPU and
    /// RSS are sampled as a local broker's.
    #[arg(long, value_name = "PID", requires = "compare")]
    pub compare_pid: Option<u32>,

    /// sweep: the rates to try, msg/s, in order [1000,2000,5000,10000,20000,50000,…,1000000].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub sweep_rates: Vec<u64>,

    /// Measured time in seconds (after warm-up) [scenario default].
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,

    /// Warm-up in seconds: produced and consumed but not recorded [scenario default].
    #[arg(long, value_name = "SECONDS")]
    pub warmup: Option<f64>,

    /// Records per second over all producers; 0 = as fast as the broker takes them.
    #[arg(long, value_name = "MSGS_PER_SEC")]
    pub rate: Option<u64>,

    /// Record value size in bytes (at least 24: the timing stamp).
    #[arg(long, value_name = "BYTES")]
    pub record_bytes: Option<usize>,

    /// Partitions of the topic the run creates.
    #[arg(long)]
    pub partitions: Option<u32>,

    /// Producer acks.
    #[arg(long, value_enum)]
    pub acks: Option<Acks>,

    /// Producer compression.
    #[arg(long, value_enum)]
    pub compression: Option<Compression>,

    /// Producer clients (each a thread with its own connection).
    #[arg(long)]
    pub producers: Option<u32>,

    /// Consumer groups; each reads every record.
    #[arg(long)]
    pub groups: Option<u32>,

    /// Consumers per group: the group coordinator splits the partitions among them (with
    /// `--assign`, round-robin).
    #[arg(long)]
    pub consumers: Option<u32>,

    /// Producer linger.ms (librdkafka's default is 5, which alone adds milliseconds).
    #[arg(long)]
    pub linger_ms: Option<u32>,

    /// Producer batch.size in bytes.
    #[arg(long, value_name = "BYTES")]
    pub batch_bytes: Option<u32>,

    /// Idempotent producers (enable.idempotence=true; needs acks=all).
    #[arg(long)]
    pub idempotence: bool,

    /// transactions: records per transaction, spread round-robin over the partitions [10].
    #[arg(long, value_name = "RECORDS")]
    pub records_per_txn: Option<u32>,

    /// catchup: bytes of record values produced before the consumer starts.
    #[arg(long, value_name = "BYTES")]
    pub catchup_bytes: Option<u64>,

    /// soak: the scenario to soak.
    #[arg(long, value_enum, default_value_t = ScenarioName::Latency)]
    pub soak_of: ScenarioName,

    /// soak: seconds between report lines (also used by other scenarios when given).
    #[arg(long, value_name = "SECONDS")]
    pub report_every: Option<f64>,

    /// Topic name [sluice-loadgen-<scenario>-<run id>]; an existing topic is used as it is.
    #[arg(long)]
    pub topic: Option<String>,

    /// Topic config at creation, e.g. flush.messages=1; repeatable.
    #[arg(long, value_name = "KEY=VALUE")]
    pub topic_config: Vec<String>,

    /// segment.bytes of the created topic [scenario default; partitions are preallocated].
    #[arg(long, value_name = "BYTES")]
    pub segment_bytes: Option<u64>,

    /// Replication factor of the created topic.
    #[arg(long, default_value_t = 1)]
    pub replication_factor: i32,

    /// Consumers assign() themselves a round-robin share of the partitions instead of joining
    /// their group with subscribe() (for brokers without consumer groups).
    #[arg(long)]
    pub assign: bool,

    /// Seconds to wait, after the producers stop, for consumers to receive every record.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub drain_timeout: f64,

    /// JSON result file [loadgen-out/<scenario>.json]; the HdrHistogram logs
    /// (`<stem>.<broker>.hlog`) and the plot (`<stem>.svg`) are written beside it.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// The `sluice` binary for the local broker [next to this executable; env SLUICE_BIN].
    #[arg(long, env = "SLUICE_BIN", value_name = "PATH")]
    pub sluice_bin: Option<PathBuf>,

    /// CPUs of the local broker, e.g. 0 or 0-1 [the first half of this process's CPUs]; with
    /// --bootstrap, where the broker runs: the floor and the baselines' server run there [this
    /// process's CPUs that --loadgen-cpus leaves; unpinned if none].
    #[arg(long, value_name = "LIST")]
    pub broker_cpus: Option<String>,

    /// CPUs loadgen's threads run on [the CPUs left to the local broker; unpinned with
    /// --bootstrap].
    #[arg(long, value_name = "LIST")]
    pub loadgen_cpus: Option<String>,

    /// A `--set KEY=VALUE` for the local broker, e.g. log.flush.interval.messages=1; repeatable.
    #[arg(long, value_name = "KEY=VALUE")]
    pub broker_set: Vec<String>,

    /// Directory under which the local broker's temporary data directory is made [system
    /// temp dir]; must be a real disk for O_DIRECT.
    #[arg(long, value_name = "DIR")]
    pub data_parent: Option<PathBuf>,

    /// latency: skip the floor run (sluice-floor, see above).
    #[arg(long)]
    pub no_floor: bool,

    /// The `sluice-floor` binary [next to this executable; env SLUICE_FLOOR_BIN].
    #[arg(long, env = "SLUICE_FLOOR_BIN", value_name = "PATH")]
    pub floor_bin: Option<PathBuf>,

    /// Skip the raw TCP and disk baselines.
    #[arg(long)]
    pub no_baselines: bool,

    /// Directory on the broker's data disk for the disk baseline when the broker is not local
    /// [current directory].
    #[arg(long, value_name = "DIR")]
    pub disk_dir: Option<PathBuf>,
}
