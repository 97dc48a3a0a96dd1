//! The shard runtime — the one module that starts glommio executors and wires them (DESIGN.md
//! §2): one executor per configured core, pinned; a full mesh of bounded channels between
//! them; on each, the shard's partitions are opened, a listener bound with `SO_REUSEPORT`
//! (glommio sets it on every bind), and each accepted connection served on that shard.
//! The replication runtime seam on these executors is `crate::seam::GlommioRuntime`.

use crate::connection;
use crate::controller::Startup;
use crate::messages::{ShardMsg, SHARD_CHANNEL_CAPACITY};
use crate::metadata::ClusterMetadata;
use crate::shard::{Shard, TaskQueues};
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::net::TcpListener;
use glommio::{LocalExecutorBuilder, Placement};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tuning::config::BrokerConfig;

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
    ensure_ports_free(&config)?;
    let stop = Arc::new(AtomicBool::new(false));
    let member = Arc::new(AtomicBool::new(false));
    let shards = config.cores.len();
    anyhow::ensure!(shards > 0, "no cores to run on");
    let mesh = MeshBuilder::<ShardMsg, _>::full(shards, SHARD_CHANNEL_CAPACITY);
    let metadata = Arc::new(ClusterMetadata::new(
        startup.image.clone(),
        shards,
        config.node_id,
    ));
    let config = Arc::new(config);
    let mut handles = Vec::new();
    let mut startup = Some(startup);
    let serving = Arc::new(AtomicUsize::new(0));
    for (id, &cpu) in config.cores.iter().enumerate() {
        let (mesh, metadata, config, stop, serving, signal, member) = (
            mesh.clone(),
            metadata.clone(),
            config.clone(),
            stop.clone(),
            serving.clone(),
            signal.clone(),
            member.clone(),
        );
        let startup = startup.take();
        let io_memory = config.shard_settings(cpu).io_memory_bytes;
        let handle = LocalExecutorBuilder::new(Placement::Fixed(cpu))
            .name(&format!("sluice-shard-{id}"))
            .io_memory(io_memory)
            .spawn(move || async move {
                let flags = Flags {
                    member,
                    signal,
                    stop,
                };
                shard_main(
                    id,
                    (*config).clone(),
                    metadata,
                    mesh,
                    startup,
                    flags,
                    serving,
                )
                .await
            })
            .map_err(|e| anyhow::anyhow!("starting shard {id} on cpu {cpu}: {e}"))?;
        handles.push(handle);
    }
    let mut first_error = None;
    for (id, handle) in handles.into_iter().enumerate() {
        match handle.join() {
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

async fn shard_main(
    id: usize,
    config: BrokerConfig,
    metadata: Arc<ClusterMetadata>,
    mesh: MeshBuilder<ShardMsg, glommio::channels::channel_mesh::Full>,
    startup: Option<Startup>,
    flags: Flags,
    serving: Arc<AtomicUsize>,
) -> anyhow::Result<()> {
    let (signal, stop) = (flags.signal.clone(), flags.stop.clone());
    let (senders, mut receivers) = mesh
        .join()
        .await
        .map_err(|e| anyhow::anyhow!("shard {id}: joining the channel mesh failed: {e}"))?;
    let listen = config.listen;
    let admin_listen = config.admin_listen;
    let settings = config.shard_settings(config.cores[id]);
    let queues = TaskQueues::create(&settings)?;
    let shard = Shard::new(
        id,
        Rc::new(config),
        &settings,
        queues,
        metadata.clone(),
        senders,
    )
    .into_rc();
    shard.apply_metadata(metadata).await;
    if let Some(startup) = startup {
        crate::controller::start(&shard, startup).await?;
        let stopping = shard.clone();
        let stop = stop.clone();
        glommio::spawn_local(async move {
            while !signal.load(Ordering::SeqCst) {
                glommio::timer::sleep(crate::shutdown::STOP_POLL).await;
            }
            if crate::controller::has_other_live_brokers(&stopping) {
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
    let watcher = shard.stop.clone();
    glommio::spawn_local(async move { watcher.watch(stop).await }).detach();
    for (_, receiver) in receivers.streams() {
        let shard = shard.clone();
        glommio::spawn_local(async move {
            while let Some(msg) = receiver.recv().await {
                // One task per message: a parked fetch must not hold up the next request.
                let queue = shard.queues.for_message(&msg);
                let shard = shard.clone();
                crate::shard::spawn_into(queue, async move {
                    crate::dispatch::handle_message(&shard, msg).await
                });
            }
        })
        .detach();
    }
    let background = shard.clone();
    crate::shard::spawn_into(Some(shard.queues.background), async move {
        background.retention_loop().await
    });
    let background = shard.clone();
    crate::shard::spawn_into(Some(shard.queues.background), async move {
        background.high_watermark_checkpoint_loop().await
    });
    let expiration = shard.clone();
    crate::shard::spawn_into(Some(shard.queues.background), async move {
        crate::partitions::isr_changes::isr_expiration_loop(&expiration).await
    });
    let coordinator = shard.clone();
    glommio::spawn_local(async move { crate::groups::service::deadline_loop(&coordinator).await })
        .detach();
    let loader = shard.clone();
    glommio::spawn_local(async move { crate::groups::service::load_loop(&loader).await }).detach();
    // A shard with `listen = false` binds nothing: the kernel spreads connections over the
    // shards that listen, and this one serves only forwarded partition work.
    // Clients are accepted once this broker is a registered, unfenced member of the cluster
    // (before, Metadata would list no broker and CreateTopics find none to place replicas
    // on). Shard 0 says so when the controller has unfenced it.
    if id == 0 {
        let watcher = shard.clone();
        let member = flags.member.clone();
        glommio::spawn_local(async move {
            while !crate::controller::serving(&watcher) {
                if watcher.sleep_unless_stopped(SERVING_CHECK_INTERVAL).await {
                    return;
                }
            }
            member.store(true, Ordering::Release);
        })
        .detach();
    }
    while !flags.member.load(Ordering::Acquire) {
        if shard.sleep_unless_stopped(SERVING_CHECK_INTERVAL).await {
            break;
        }
    }
    let listener = if settings.listen && !shard.stop.is_requested() {
        Some(
            TcpListener::bind(listen)
                .map_err(|e| anyhow::anyhow!("shard {id}: binding {listen}: {e}"))?,
        )
    } else {
        None
    };
    // This shard has opened its logs and bound its listener.
    serving.fetch_add(1, Ordering::AcqRel);
    if id == 0 {
        let admin = crate::admin::bind(admin_listen)
            .map_err(|e| anyhow::anyhow!("binding admin listener {admin_listen}: {e}"))?;
        glommio::spawn_local(crate::admin::serve(admin, Rc::new(Admin(shard.clone())))).detach();
        // "listening" means every shard serves (it is a registered, unfenced member, see
        // above): said once the others have bound too (a start-up wait, checked every
        // millisecond), while this shard already accepts.
        let announcer = shard.clone();
        glommio::spawn_local(async move {
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
            tracing::info!(%listen, %admin_listen, shards = announcer.shards, "sluice serving Kafka clients");
            eprintln!(
                "sluice: listening on {listen} (admin {admin_listen}), {} shard(s)",
                announcer.shards
            );
        })
        .detach();
    }
    while let Some(listener) = &listener {
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            shard.stop.requested().await;
            None
        })
        .await;
        let Some(accepted) = accepted else { break };
        match accepted {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                let shard = shard.clone();
                glommio::spawn_local(async move { connection::serve(shard, stream).await })
                    .detach();
            }
            Err(e) => {
                tracing::warn!(shard = id, error = %e, "accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
    drop(listener);
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
    Ok(())
}

/// Refuses to start when another process listens on this broker's Kafka, admin or voter
/// address ("address already in use", as Kafka says). The shards bind with `SO_REUSEPORT`
/// (glommio sets it, so that every shard can listen on one port), which would otherwise let a
/// second broker of the same user silently share the ports and take a voter's traffic. The
/// check connects to each address (the loopback for an unspecified one) within
/// [`PORT_CHECK_TIMEOUT`]: a listener that answers is another process's. Errors: the address
/// in use, named.
fn ensure_ports_free(config: &BrokerConfig) -> anyhow::Result<()> {
    let voter = config
        .controller_quorum_voters
        .iter()
        .find(|v| v.id == config.node_id)
        .map(|v| v.addr);
    let addresses = [
        ("Kafka listener", Some(config.listen)),
        ("admin listener", Some(config.admin_listen)),
        ("controller quorum voter address", voter),
    ];
    for (what, addr) in addresses {
        let Some(mut addr) = addr else { continue };
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr {
                std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        if std::net::TcpStream::connect_timeout(&addr, PORT_CHECK_TIMEOUT).is_ok() {
            anyhow::bail!(
                "{what} {addr}: address already in use: another process listens there \
                 (another broker?)"
            );
        }
    }
    Ok(())
}

/// How long [`ensure_ports_free`] tries to connect to each of this broker's addresses.
const PORT_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(200);

/// The process-wide flags of a broker's life: `member` set by shard 0 once the controller
/// has unfenced this broker (every shard then binds its listener); `signal` set by
/// SIGTERM/SIGINT (watched by shard 0); `stop` set by shard 0 once the controlled shutdown is
/// over (watched by every shard).
struct Flags {
    member: Arc<AtomicBool>,
    signal: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
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
