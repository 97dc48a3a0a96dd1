//! `sluice-floor`: the floor of `sluice-loadgen`'s `latency` scenario — the least a broker on
//! Sluice's runtime (glommio, io_uring) must do per record, measured in the same run.
//!
//! One glommio executor (as one Sluice shard) pinned to `--cpu`: it answers enough of the
//! Kafka protocol for librdkafka (see `api`), and for each produced batch does only what a
//! broker must — read the request, one O_DIRECT write of the 4 KiB block(s) the batch
//! touches in a preallocated file, completed before the answer, then the answer — and
//! answers parked fetches with the written bytes from memory. No CRC check, no index, no
//! batch cache beyond a list of recent batches, no groups, no replication. loadgen starts it
//! as a child process (`sluice-loadgen latency`, unless `--no-floor`) and runs the same
//! latency scenario against it. See docs/benchmarks.md, "The floor".

mod api;
mod connection;
mod event;
mod handlers;
mod log;
mod state;

use anyhow::Context as _;
use clap::Parser;
use glommio::{LocalExecutorBuilder, Placement};
use state::Floor;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;

/// Flags of `sluice-floor` (normally started by `sluice-loadgen`, not by hand).
#[derive(Debug, Parser)]
#[command(
    name = "sluice-floor",
    about = "The floor of sluice-loadgen's latency scenario: a minimal Kafka-speaking server on \
             glommio that does only a broker's per-record system work"
)]
struct Cli {
    /// Address to listen on, e.g. 127.0.0.1:9092.
    #[arg(long)]
    listen: SocketAddr,
    /// Directory for the preallocated partition files (must support O_DIRECT).
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// CPU the executor is pinned to [unpinned].
    #[arg(long)]
    cpu: Option<usize>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-floor: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    std::fs::create_dir_all(&cli.data_dir)
        .with_context(|| format!("creating {}", cli.data_dir.display()))?;
    let placement = cli.cpu.map_or(Placement::Unbound, Placement::Fixed);
    let handle = LocalExecutorBuilder::new(placement)
        .name("sluice-floor")
        .spawn(move || async move { serve(cli).await })
        .map_err(|e| anyhow::anyhow!("starting the executor: {e}"))?;
    handle
        .join()
        .map_err(|e| anyhow::anyhow!("the executor stopped: {e:?}"))?
}

/// Accepts connections until killed (loadgen stops the floor with SIGTERM).
async fn serve(cli: Cli) -> anyhow::Result<()> {
    probe_iopoll(&cli.data_dir).await?;
    let listener = glommio::net::TcpListener::bind(cli.listen)
        .map_err(|e| anyhow::anyhow!("binding {}: {e}", cli.listen))?;
    let address = listener
        .local_addr()
        .map_err(|e| anyhow::anyhow!("listener address: {e}"))?;
    let floor = Rc::new(Floor::new(
        cli.data_dir.clone(),
        address.ip().to_string(),
        i32::from(address.port()),
    ));
    loop {
        let stream = listener
            .accept()
            .await
            .map_err(|e| anyhow::anyhow!("accept: {e}"))?;
        glommio::spawn_local(connection::serve(floor.clone(), stream)).detach();
    }
}

/// glommio 0.9 decides whether the device supports polled I/O by reading the first DMA file
/// an executor opens, and an empty one makes the probe wrongly succeed (every DMA operation
/// then fails with EOPNOTSUPP; DESIGN.md §8). Opening a file holding one block first, as
/// Sluice's storage does, makes the probe see the truth.
async fn probe_iopoll(dir: &Path) -> anyhow::Result<()> {
    let path = dir.join(".floor-iopoll-probe");
    std::fs::write(&path, [0xa5u8; 4096]).with_context(|| format!("writing {}", path.display()))?;
    let probe = glommio::io::DmaFile::open(&path)
        .await
        .map_err(|e| anyhow::anyhow!("opening {}: {e}", path.display()))?;
    probe
        .close()
        .await
        .map_err(|e| anyhow::anyhow!("closing {}: {e}", path.display()))?;
    Ok(())
}
