//! The shard runtime — the one module that starts glommio executors and wires them (DESIGN.md
//! §2): one executor per configured core, pinned; a full mesh of bounded channels between
//! them; on each, the shard's partitions are opened and each connection its listener hands it
//! served on that shard. The listening sockets are bound here before the executors start
//! and accepted on plain threads ([`crate::listener`]), so none outlives the process.
//! The replication runtime seam on these executors is `crate::seam::ShardRuntime`.

use crate::connection;
use crate::controller::Startup;
use crate::listener::{self, Closer, Handoff};
use crate::messages::{ShardMsg, SHARD_CHANNEL_CAPACITY};
use crate::metadata::ClusterMetadata;
use crate::rt::MeshBuilder;
use crate::rt::{CpuSet, LocalExecutorBuilder, Placement, PoolPlacement};
use crate::shard::{Shard, TaskQueues};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tuning::config::BrokerConfig;

/// Threads of each shard's blocking pool (checkpoint writes, directory operations), pinned to
/// the shard's CPU: mostly waiting on fsyncs, which several overlap (glommio's default is one).
const BLOCKING_THREADS_PER_SHARD: usize = 8;

/// How often shard 0 checks, at start-up, whether every shard serves before it says so.
const SERVING_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(1);

/// Starts one shard per core and blocks until they all stop; the shards start from
/// `startup.image`, and shard 0 runs the controller quorum's voter from the rest of
/// `startup`. Errors: an executor could not start, a shard failed to bind its listener, or
/// the voter did not start.
///
/// Shutdown: `signal` is set at SIGTERM/SIGINT. Shard 0 then runs a controlled shutdown (this
/// broker's leaderships move to other in-sync replicas, when another live broker exists)
/// before it tells every shard to stop.
pub fn run(config: BrokerConfig, startup: Startup, signal: Arc<AtomicBool>) -> anyhow::Result<()> {
    let shards = config.cores.len();
    anyhow::ensure!(shards > 0, "no cores to run on");
    let (mut per_shard, closers) = bind_listeners(&config)?;
    let inter_broker = crate::peer::PeerSecurity::inter_broker(&config)?;
    let flags = Flags {
        member: Arc::new(AtomicBool::new(false)),
        signal,
        stop: Arc::new(AtomicBool::new(false)),
        serving: Arc::new(AtomicUsize::new(0)),
        log_dir: Arc::new(crate::log_dir::LogDir::default()),
    };
    let mesh = MeshBuilder::<ShardMsg, _>::full(shards, SHARD_CHANNEL_CAPACITY);
    let metadata = Arc::new(ClusterMetadata::new(
        startup.image.clone(),
        shards,
        config.node_id,
    ));
    let config = Arc::new(config);
    let mut handles = Vec::new();
    let mut startup = Some(startup);
    for (id, &cpu) in config.cores.iter().enumerate() {
        let (mesh, metadata, config, flags) = (
            mesh.clone(),
            metadata.clone(),
            config.clone(),
            flags.clone(),
        );
        let startup = startup.take();
        let mut listeners = std::mem::take(&mut per_shard[id]);
        listeners.inter_broker = inter_broker.clone();
        let settings = config.shard_settings(cpu);
        let shard_cpu = CpuSet::online()
            .map_err(|e| anyhow::anyhow!("listing CPUs: {e}"))?
            .filter(|l| l.cpu == cpu);
        let mut builder = LocalExecutorBuilder::new(Placement::Fixed(cpu))
            .name(&format!("sluice-shard-{id}"))
            .io_memory(settings.io_memory_bytes)
            .blocking_thread_pool_placement(PoolPlacement::Custom(vec![
                shard_cpu;
                BLOCKING_THREADS_PER_SHARD
            ]));
        if settings.spin_before_park_us > 0 {
            // `[[shard]] spin.before.park.us`: busy-poll the rings before sleeping (a
            // dedicated core); glommio spins only on an executor bound to one CPU, as here.
            builder = builder.spin_before_park(Duration::from_micros(settings.spin_before_park_us));
        }
        let handle = builder
            .spawn(move || async move {
                shard_main(
                    id,
                    (*config).clone(),
                    metadata,
                    mesh,
                    startup,
                    flags,
                    listeners,
                )
                .await
            })
            .map_err(|e| anyhow::anyhow!("starting shard {id} on cpu {cpu}: {e}"))?;
        handles.push(handle);
    }
    let joined = join_shards(handles.into_iter().map(|handle| handle.join()));
    for closer in closers {
        closer.close();
    }
    joined
}

/// Takes each shard's end in shard order; the first error any reported, or that stopped one.
fn join_shards<E: std::fmt::Debug>(
    ends: impl Iterator<Item = Result<anyhow::Result<()>, E>>,
) -> anyhow::Result<()> {
    let mut first_error = None;
    for (id, end) in ends.enumerate() {
        match end {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(anyhow::anyhow!("shard {id} stopped: {e:?}"));
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// What one shard serves of the listeners [`bind_listeners`] bound.
#[derive(Default)]
struct ShardListeners {
    /// Its share of each Kafka listener's connections (none: a shard with `listen = false`),
    /// with the closer that stops the listener when the shard stops accepting.
    kafka: Vec<KafkaListener>,
    /// The admin HTTP listener (shard 0).
    admin: Option<Handoff>,
    /// The controller quorum voter's listener and its address (shard 0, on a voter).
    voter: Option<(Handoff, std::net::SocketAddr)>,
    /// How the voters secure their connections (shard 0).
    voter_security: crate::quorum::transport::VoterSecurity,
    /// How the shard's connections to other brokers' inter-broker listener are secured (the
    /// client side of `inter.broker.listener.name`).
    inter_broker: crate::peer::PeerSecurity,
}

/// One shard's share of one Kafka listener (`listeners`).
struct KafkaListener {
    /// The listener name, upper case.
    name: String,
    /// Its TLS side, on an `SSL` or `SASL_SSL` listener.
    tls: Option<crate::tls::ListenerTls>,
    /// Its SASL settings, on a `SASL_PLAINTEXT` or `SASL_SSL` listener.
    sasl: Option<Arc<crate::sasl::SaslListener>>,
    handoff: Handoff,
    closer: Closer,
}

/// Binds the Kafka, admin and voter addresses once for the process (see
/// [`crate::listener`]: a live process's listener refuses the start, naming the address; an
/// exited process's is waited for) and starts their accept threads. Returns each shard's
/// listeners and the closers of the admin and voter listeners, closed once the shards stopped.
fn bind_listeners(config: &BrokerConfig) -> anyhow::Result<(Vec<ShardListeners>, Vec<Closer>)> {
    let listening: Vec<usize> = (0..config.cores.len())
        .filter(|&id| config.shard_settings(config.cores[id]).listen)
        .collect();
    anyhow::ensure!(!listening.is_empty(), "no shard listens");
    let voter = config.voter_address();
    let mut kafka = Vec::with_capacity(config.listeners.len());
    // A controller-only node (`process.roles=controller`) serves no Kafka client: it binds
    // only its voter address, where brokers reach it too.
    let kafka_listeners: &[tuning::config::Listener] = if config.process_roles.broker {
        &config.listeners
    } else {
        &[]
    };
    for l in kafka_listeners {
        let protocol = config.listener_protocol(&l.name);
        let tls = match protocol {
            Some(p) if p.uses_tls() => Some(crate::tls::ListenerTls::new(config, &l.name)?),
            _ => None,
        };
        let sasl = match protocol {
            Some(p) if p.uses_sasl() => {
                Some(Arc::new(crate::sasl::SaslListener::new(config, &l.name)?))
            }
            _ => None,
        };
        let bound = listener::bind("Kafka listener", l.addr)?;
        kafka.push((l.name.clone(), tls, sasl, bound));
    }
    let voter_security = crate::quorum::transport::VoterSecurity::new(config)?;
    let admin = listener::bind("admin listener", config.admin_listen)?;
    let voter = voter
        .map(|addr| listener::bind("controller quorum voter address", addr))
        .transpose()?;
    let mut shards: Vec<ShardListeners> = std::iter::repeat_with(ShardListeners::default)
        .take(config.cores.len())
        .collect();
    for (name, tls, sasl, bound) in kafka {
        let (closer, handoffs) = bound.serve(listening.len())?;
        for (&id, handoff) in listening.iter().zip(handoffs) {
            shards[id].kafka.push(KafkaListener {
                name: name.clone(),
                tls: tls.clone(),
                sasl: sasl.clone(),
                handoff,
                closer: closer.clone(),
            });
        }
    }
    let (admin_closer, mut handoffs) = admin.serve(1)?;
    shards[0].admin = handoffs.pop();
    shards[0].voter_security = voter_security;
    let mut closers = vec![admin_closer];
    if let Some(voter) = voter {
        let addr = voter.local_addr();
        let (closer, mut handoffs) = voter.serve(1)?;
        shards[0].voter = handoffs.pop().map(|h| (h, addr));
        closers.push(closer);
    }
    Ok((shards, closers))
}

async fn shard_main(
    id: usize,
    config: BrokerConfig,
    metadata: Arc<ClusterMetadata>,
    mesh: MeshBuilder<ShardMsg, crate::rt::Full>,
    startup: Option<Startup>,
    flags: Flags,
    listeners: ShardListeners,
) -> anyhow::Result<()> {
    let (signal, stop) = (flags.signal.clone(), flags.stop.clone());
    let (senders, mut receivers) = mesh
        .join()
        .await
        .map_err(|e| anyhow::anyhow!("shard {id}: joining the channel mesh failed: {e}"))?;
    let listen = config
        .listeners
        .iter()
        .filter(|_| config.process_roles.broker)
        .map(|l| {
            if config.listeners.len() == 1 && l.name == "PLAINTEXT" {
                l.addr.to_string()
            } else {
                format!("{}://{}", l.name, l.addr)
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    let admin_listen = config.admin_listen;
    let inter_broker = listeners.inter_broker.clone();
    let shard = new_shard(id, config, metadata.clone(), senders, &flags, inter_broker)?;
    crate::partition_lifecycle::apply_metadata(&shard, metadata).await;
    if let Some(startup) = startup {
        start_controller(&shard, startup, listeners.voter, listeners.voter_security).await?;
        spawn_shutdown_watcher(&shard, signal, stop.clone());
    }
    log_opened_partitions(&shard, id);
    let watcher = shard.stop.clone();
    crate::rt::spawn_local(async move { watcher.watch(stop).await }).detach();
    for (_, receiver) in receivers.streams() {
        let shard = shard.clone();
        crate::rt::spawn_local(async move {
            while let Some(msg) = receiver.recv().await {
                // One task per message: a parked fetch must not hold up the next request.
                let queue = crate::dispatch::queue_for(&shard.queues, &msg);
                let shard = shard.clone();
                crate::shard::spawn_into(queue, async move {
                    crate::dispatch::handle_message(&shard, msg).await
                });
            }
        })
        .detach();
    }
    spawn_background_loops(&shard);
    // A shard with `listen = false` gets no connections: the accept thread hands them to the
    // shards that listen in turn, and this one serves only forwarded partition work.
    // Clients are accepted once this broker is a registered, unfenced member of the cluster
    // (before, Metadata would list no broker and CreateTopics find none to place replicas
    // on). Shard 0 says so when the controller has unfenced it.
    wait_for_membership(&shard, id, &flags.member).await;
    let kafka = if shard.stop.is_requested() {
        Vec::new()
    } else {
        listeners.kafka
    };
    let mut closers = Vec::with_capacity(kafka.len());
    let mut incoming = Vec::with_capacity(kafka.len());
    for l in kafka {
        closers.push(l.closer);
        let context = connection::ListenerContext {
            name: l.name.into(),
            tls: RefCell::new(l.tls),
            sasl: l.sasl,
        };
        incoming.push((l.handoff.incoming(), Rc::new(context)));
    }
    let tls_listeners: Vec<Rc<connection::ListenerContext>> = incoming
        .iter()
        .filter(|(_, l)| l.tls.borrow().is_some())
        .map(|(_, l)| l.clone())
        .collect();
    if !tls_listeners.is_empty() {
        let reloader = shard.clone();
        crate::rt::spawn_local(async move { tls_reload_loop(&reloader, &tls_listeners).await })
            .detach();
    }
    // This shard has opened its logs and bound its listener.
    let serving = flags.serving.clone();
    serving.fetch_add(1, Ordering::AcqRel);
    if id == 0 {
        spawn_admin(&shard, listeners.admin);
        spawn_announcer(&shard, serving, listen, admin_listen);
    }
    futures_util::future::join_all(
        incoming
            .iter_mut()
            .map(|(connections, name)| accept_connections(&shard, id, connections, name)),
    )
    .await;
    // Stop accepting before the drain: nothing may queue in a backlog nobody will serve.
    for closer in closers {
        closer.close();
    }
    drop(incoming);
    stop_shard(&shard, id).await;
    Ok(())
}

/// Once the shard is asked to stop: the controller stops, connections drain (within
/// [`crate::shutdown::DRAIN_TIMEOUT`]) and the partitions close.
async fn stop_shard(shard: &Shard, id: usize) {
    shard.stop.requested().await;
    if let Some(controller) = shard.controller.get() {
        controller.stop();
    }
    let lingering = shard.stop.drained(crate::shutdown::DRAIN_TIMEOUT).await;
    let closed = shard.close_partitions().await;
    tracing::info!(
        shard = id,
        closed,
        lingering_connections = lingering,
        "shard stopped"
    );
}

/// Shard `id`'s context: its settings and task queues from `config`, its senders into the mesh.
fn new_shard(
    id: usize,
    config: BrokerConfig,
    metadata: Arc<ClusterMetadata>,
    senders: crate::rt::Senders<ShardMsg>,
    flags: &Flags,
    inter_broker: crate::peer::PeerSecurity,
) -> anyhow::Result<Rc<Shard>> {
    let settings = config.shard_settings(config.cores[id]);
    let queues = TaskQueues::create(&settings)?;
    Ok(Shard::new(
        id,
        Rc::new(config),
        &settings,
        queues,
        metadata,
        senders,
        flags.log_dir.clone(),
        crate::partition_lifecycle::open_partition_boxed,
        inter_broker,
    )
    .into_rc())
}

/// Shard 0 of a broker with a controller: on SIGTERM/SIGINT, a controlled shutdown (when
/// other brokers can take the leaderships), then `stop` for every shard.
fn spawn_shutdown_watcher(shard: &Rc<Shard>, signal: Arc<AtomicBool>, stop: Arc<AtomicBool>) {
    let stopping = shard.clone();
    crate::rt::spawn_local(async move {
        while !signal.load(Ordering::SeqCst) {
            crate::rt::sleep(crate::shutdown::STOP_POLL).await;
        }
        if stopping.config.process_roles.broker
            && crate::controller::has_other_live_brokers(&stopping)
        {
            let agreed = crate::controller::controlled_shutdown(&stopping).await;
            tracing::info!(
                agreed,
                "controlled shutdown: leaderships moved to other replicas"
            );
        }
        stop.store(true, Ordering::SeqCst);
    })
    .detach();
}

/// Logs how many partition logs the shard opened, and how many after a clean shutdown.
fn log_opened_partitions(shard: &Shard, id: usize) {
    let opened: Vec<bool> = shard
        .partitions
        .borrow()
        .values()
        .map(|p| p.log().stats().opened_clean)
        .collect();
    let clean = opened.iter().filter(|c| **c).count();
    tracing::info!(
        shard = id,
        partitions = opened.len(),
        clean,
        recovered = opened.len() - clean,
        "opened partition logs (clean: after a clean shutdown, only the tail was read)"
    );
}

/// The shard's background loops: retention, high-watermark checkpoints, client-quota reports
/// to the other shards (in the default queue: their delay is the quotas' staleness), the log
/// cleaner, ISR expiration, and the group coordinator's deadlines, loads and offset expiry.
fn spawn_background_loops(shard: &Rc<Shard>) {
    let background = shard.clone();
    crate::shard::spawn_into(Some(shard.queues.background), async move {
        background.retention_loop().await
    });
    let background = shard.clone();
    crate::shard::spawn_into(Some(shard.queues.background), async move {
        background.high_watermark_checkpoint_loop().await
    });
    if shard.shards > 1 {
        let reporter = shard.clone();
        crate::rt::spawn_local(async move { reporter.quota_report_loop().await }).detach();
    }
    let cleaner = shard.clone();
    crate::shard::spawn_into(Some(shard.queues.background), async move {
        crate::cleaner::cleaner_loop(&cleaner).await
    });
    let expiration = shard.clone();
    crate::shard::spawn_into(Some(shard.queues.background), async move {
        crate::partitions::isr_changes::isr_expiration_loop(&expiration).await
    });
    let coordinator = shard.clone();
    crate::rt::spawn_local(
        async move { crate::groups::service::deadline_loop(&coordinator).await },
    )
    .detach();
    let loader = shard.clone();
    crate::rt::spawn_local(async move { crate::groups::service::load_loop(&loader).await })
        .detach();
    let expirer = shard.clone();
    crate::shard::spawn_into(Some(shard.queues.background), async move {
        crate::groups::service::expiry_loop(&expirer).await
    });
    let txn_loader = shard.clone();
    crate::rt::spawn_local(async move { crate::txn::service::load_loop(&txn_loader).await })
        .detach();
    let txn_timeouts = shard.clone();
    crate::shard::spawn_into(Some(shard.queues.background), async move {
        crate::txn::service::timeout_loop(&txn_timeouts).await
    });
}

/// Waits until this broker is a registered, unfenced member (shard 0 watches the controller
/// and says so to every shard through `member`), or the shard stops.
async fn wait_for_membership(shard: &Rc<Shard>, id: usize, member: &Arc<AtomicBool>) {
    if !shard.config.process_roles.broker {
        // A controller-only node is no member of the brokers and serves no client.
        return;
    }
    if id == 0 {
        let watcher = shard.clone();
        let member = member.clone();
        crate::rt::spawn_local(async move {
            while !crate::controller::serving(&watcher) {
                if watcher.sleep_unless_stopped(SERVING_CHECK_INTERVAL).await {
                    return;
                }
            }
            member.store(true, Ordering::Release);
        })
        .detach();
    }
    while !member.load(Ordering::Acquire) {
        if shard.sleep_unless_stopped(SERVING_CHECK_INTERVAL).await {
            break;
        }
    }
}

/// Shard 0: serves the admin HTTP listener, if it has one.
fn spawn_admin(shard: &Rc<Shard>, admin: Option<Handoff>) {
    if let Some(admin) = admin {
        let admin = admin.incoming();
        crate::rt::spawn_local(crate::admin::serve(admin, Rc::new(Admin(shard.clone())))).detach();
    }
}

/// Shard 0: says "listening" once every shard serves (`serving` counts them).
fn spawn_announcer(
    shard: &Rc<Shard>,
    serving: Arc<AtomicUsize>,
    listen: String,
    admin_listen: std::net::SocketAddr,
) {
    // "listening" means every shard serves (it is a registered, unfenced member, see
    // above): said once the others have bound too (a start-up wait, checked every
    // millisecond), while this shard already accepts.
    let announcer = shard.clone();
    crate::rt::spawn_local(async move {
        while serving.load(Ordering::Acquire) < announcer.shards {
            if announcer
                .sleep_unless_stopped(SERVING_CHECK_INTERVAL)
                .await
            {
                return;
            }
        }
        // A shutdown during start-up bound no listener: nothing serves.
        if announcer.stop.is_requested() {
            return;
        }
        if !announcer.config.process_roles.broker {
            let voter = announcer
                .config
                .voter_address()
                .map_or_else(String::new, |a| a.to_string());
            tracing::info!(%voter, %admin_listen, "sluice serving as a controller only");
            eprintln!(
                "sluice: controller listening on {voter} (admin {admin_listen}), no Kafka \
                 listener (process.roles=controller)"
            );
            return;
        }
        tracing::info!(%listen, %admin_listen, shards = announcer.shards, "sluice serving Kafka clients");
        eprintln!(
            "sluice: listening on {listen} (admin {admin_listen}), {} shard(s)",
            announcer.shards
        );
    })
    .detach();
}

/// How often each shard looks for a changed listener key store (a dynamic
/// `listener.name.<l>.ssl.keystore.*` config, [`crate::dynamic_config::is_dynamic_tls`]).
const TLS_RELOAD_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Certificate rotation without a restart: when the dynamic TLS store keys that apply to this
/// broker change, every TLS listener of this shard is rebuilt from the start-up config with
/// the dynamic configs applied (files read on the blocking pool); new connections get the new
/// key store, open ones keep theirs. A store that does not load is logged and the old one kept.
async fn tls_reload_loop(shard: &Rc<Shard>, listeners: &[Rc<connection::ListenerContext>]) {
    let node_id = shard.config.node_id;
    let mut applied = crate::dynamic_config::dynamic_tls_keys(&BTreeMap::new(), node_id);
    while !shard.sleep_unless_stopped(TLS_RELOAD_CHECK_INTERVAL).await {
        let metadata = shard.metadata();
        let wanted = crate::dynamic_config::dynamic_tls_keys(&metadata.broker_configs, node_id);
        if wanted == applied {
            continue;
        }
        let config = match crate::dynamic_config::effective(&shard.config, &metadata.broker_configs)
        {
            Ok(config) => config,
            Err(e) => {
                tracing::error!(error = %e, "dynamic TLS configs do not apply; key stores kept");
                applied = wanted;
                continue;
            }
        };
        for listener in listeners {
            let (config, name) = (config.clone(), listener.name.to_string());
            let built =
                crate::rt::spawn_blocking(move || crate::tls::ListenerTls::new(&config, &name))
                    .await;
            match built {
                Ok(tls) => {
                    tracing::info!(listener = %listener.name, "TLS key store reloaded");
                    *listener.tls.borrow_mut() = Some(tls);
                }
                Err(e) => {
                    tracing::error!(listener = %listener.name, error = %e, "the new TLS key store does not load; the old one is kept");
                }
            }
        }
        applied = wanted;
    }
}

/// Serves each connection `connections` (of listener `name`) hands this shard, until the
/// shard stops or the accept thread ends.
async fn accept_connections(
    shard: &Rc<Shard>,
    id: usize,
    connections: &mut listener::Incoming,
    name: &Rc<connection::ListenerContext>,
) {
    loop {
        let accepted =
            futures_lite::future::or(async { Some(connections.accept().await) }, async {
                shard.stop.requested().await;
                None
            })
            .await;
        let Some(accepted) = accepted else { break };
        match accepted {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                let (shard, name) = (shard.clone(), name.clone());
                crate::rt::spawn_local(async move { connection::serve(shard, stream, name).await })
                    .detach();
            }
            Err(e) => {
                // Only the accept thread's end can fail: the listener is gone.
                if !shard.stop.is_requested() {
                    tracing::error!(shard = id, error = %e, "the Kafka listener's accept thread ended");
                }
                break;
            }
        }
    }
}

/// The process-wide flags of a broker's life: `member` set by shard 0 once the controller
/// has unfenced this broker (every shard then takes its connections); `signal` set by
/// SIGTERM/SIGINT (watched by shard 0); `stop` set by shard 0 once the controlled shutdown is
/// over (watched by every shard); `serving` counts the shards that take their connections;
/// `log_dir` is the log directory's state (set by any shard, read by shard 0's heartbeats).
#[derive(Clone)]
struct Flags {
    member: Arc<AtomicBool>,
    signal: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    serving: Arc<AtomicUsize>,
    log_dir: Arc<crate::log_dir::LogDir>,
}

/// The admin port's view of the broker: gathers every shard's snapshot per request.
struct Admin(Rc<Shard>);

impl crate::admin::AdminSource for Admin {
    fn status(&self) -> crate::admin::LocalFuture<serde_json::Value> {
        let shard = self.0.clone();
        Box::pin(async move { crate::metrics::status_json(&shard.gather().await) })
    }

    fn metrics(&self) -> crate::admin::LocalFuture<String> {
        let shard = self.0.clone();
        Box::pin(async move { crate::metrics::render(shard.gather().await) })
    }
}

/// Starts the controller service on shard 0 from `startup` (what
/// `controller::bootstrap::recover` read from the data directory): on a controller
/// (`process.roles` holds it) this node's voter, the bootstrap of a new metadata log, fencing
/// and leader balance; on a broker-only node the observer that follows the metadata log
/// instead; then the publisher, and on a broker its lifecycle. Errors: the voter could not
/// start (its storage, its listener). `voter`: the listener bound for this node's voter
/// address (see `crate::listener`); `security`: how the voters secure their connections.
async fn start_controller(
    shard: &Rc<Shard>,
    startup: Startup,
    voter: Option<(crate::listener::Handoff, std::net::SocketAddr)>,
    security: crate::quorum::transport::VoterSecurity,
) -> anyhow::Result<()> {
    let roles = shard.config.process_roles;
    let empty = replication::metadata::MetadataImage::new(String::new());
    let (machine, view) = if roles.controller {
        replication::metadata::MetadataStateMachine::new(empty)
    } else {
        replication::metadata::MetadataStateMachine::observer(empty)
    };
    let to_voters = security.client.clone();
    let voters = crate::controller::voters::VoterBook::new(
        shard.config.controller_quorum_voters.clone(),
        view.clone(),
    );
    let (quorum, observer) = if roles.controller {
        let forwarded = voter.is_some().then(|| forwarded_requests(shard));
        let resolve = voters.resolver();
        let quorum =
            crate::quorum::start(&shard.config, machine, voter, resolve, security, forwarded)
                .await
                .map_err(|e| anyhow::anyhow!("starting the controller quorum voter: {e}"))?;
        (Some(quorum), None)
    } else {
        (None, Some(machine))
    };
    let controller = crate::controller::state::Controller::new(quorum, view, voters, to_voters);
    if shard.controller.set(controller).is_err() {
        anyhow::bail!("the controller was started twice");
    }
    if shard.config.joins_quorum() {
        let joining = shard.clone();
        crate::rt::spawn_local(crate::controller::learn_from_bootstrap(joining)).detach();
    }
    let publisher = shard.clone();
    let initial = startup.initial_applied;
    crate::rt::spawn_local(async move { crate::publisher::run(&publisher, initial).await })
        .detach();
    if let Some(machine) = observer {
        let observing = shard.clone();
        crate::rt::spawn_local(async move {
            crate::controller::run_observer(&observing, machine).await
        })
        .detach();
    } else {
        let booting = shard.clone();
        crate::rt::spawn_local(async move {
            crate::controller::bootstrap::run(&booting, startup).await
        })
        .detach();
        let fencing = shard.clone();
        crate::rt::spawn_local(async move { crate::controller::fence_expired(&fencing).await })
            .detach();
        let balancing = shard.clone();
        crate::rt::spawn_local(async move { crate::controller::balance_leaders(&balancing).await })
            .detach();
    }
    if roles.broker {
        let broker = shard.clone();
        crate::rt::spawn_local(async move { crate::controller::run_broker(&broker).await })
            .detach();
    }
    Ok(())
}

/// The controller's answers to the requests other nodes send to this voter's listener
/// (`crate::quorum::transport::ForwardedRequests`): forwarded controller requests, an
/// observer's fetches among them, authorized as on a Kafka listener (CLUSTER_ACTION on the
/// cluster for the peer's principal: its certificate's on an SSL controller listener, else
/// `User:ANONYMOUS`). Holds the shard weakly (the transport lives in it).
fn forwarded_requests(shard: &Rc<Shard>) -> crate::quorum::transport::ForwardedRequests {
    let weak = Rc::downgrade(shard);
    crate::quorum::transport::ForwardedRequests {
        frame_bytes_max: crate::controller::forward::FORWARD_BYTES_MAX,
        serve: Rc::new(move |frame: bytes::Bytes, peer| {
            let weak = weak.clone();
            Box::pin(async move {
                let shard = weak.upgrade()?;
                let host = peer
                    .addr
                    .map_or_else(String::new, |a| format!("/{}", a.ip()));
                let listener = shard
                    .config
                    .controller_listener()
                    .map_or("CONTROLLER", |(name, _)| name);
                let mut session = crate::session::Session::anonymous(host.into(), listener.into());
                if let Some(name) = &peer.principal {
                    session.principal = format!("User:{name}");
                }
                let action = crate::authz::AclOperation::ClusterAction;
                if !crate::authz::cluster(&shard, &session, action) {
                    tracing::warn!(principal = %session.principal, peer = ?peer.addr, "controller listener: closing a connection whose forwarded request lacks CLUSTER_ACTION on the cluster");
                    return None;
                }
                crate::controller::answer_forwarded(&shard, frame).await
            })
        }),
    }
}
