//! A temporary local server: `sluice` for the no-`--bootstrap` case, or `sluice-floor` for
//! the `latency` scenario's floor. A child process on a free loopback port with its own
//! temporary data directory and CPUs, and a sampler of its resident memory (VmRSS from
//! /proc/<pid>/status).
//!
//! Lifetime: `start` returns once the Kafka port accepts connections; `stop` sends SIGTERM
//! and waits (SIGKILL after `STOP_GRACE`); dropping an unstopped broker kills it. The child
//! also gets SIGKILL if loadgen dies (PR_SET_PDEATHSIG), so no broker outlives a run.

use crate::cpus::CpuSet;
use crate::procstat;
use crate::report::Rss;
use anyhow::{bail, Context as _};
use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the broker may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the broker may take to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(30);
/// RSS sampling period.
const RSS_PERIOD: Duration = Duration::from_millis(100);
/// Lines of the broker log shown when something goes wrong.
const LOG_TAIL_LINES: usize = 30;

/// The servers loadgen can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// The broker, `sluice` (package `sluice-broker`).
    Sluice,
    /// The floor, `sluice-floor` (this package).
    Floor,
}

impl ServerKind {
    /// The executable's name.
    pub fn binary_name(self) -> &'static str {
        match self {
            ServerKind::Sluice => "sluice",
            ServerKind::Floor => "sluice-floor",
        }
    }

    fn package(self) -> &'static str {
        match self {
            ServerKind::Sluice => "sluice-broker",
            ServerKind::Floor => "sluice-loadgen",
        }
    }
}

/// Where the `kind` binary is: `explicit` (a flag or its environment variable), else next to
/// this executable. Under `cargo run` (which sets CARGO) a missing binary is built first with
/// the same profile, so `cargo run --release -p sluice-loadgen -- latency` is the whole set-up.
pub fn find_binary(kind: ServerKind, explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let name = kind.binary_name();
    if let Some(path) = explicit {
        if !path.is_file() {
            bail!("{name} binary {} is not a file", path.display());
        }
        return Ok(path.to_path_buf());
    }
    let exe = std::env::current_exe().context("locating this executable")?;
    let dir = exe.parent().context("executable without a directory")?;
    let beside = dir.join(name);
    if beside.is_file() {
        return Ok(beside);
    }
    let (Some(cargo), Some(manifest_dir)) = (
        std::env::var_os("CARGO"),
        std::env::var_os("CARGO_MANIFEST_DIR"),
    ) else {
        bail!(
            "no {name} binary at {}: build it (cargo build --release -p {} --bin {name}), \
             or pass its path (see --help)",
            beside.display(),
            kind.package()
        );
    };
    let mut build = Command::new(cargo);
    build
        .current_dir(manifest_dir)
        .args(["build", "-p", kind.package(), "--bin", name]);
    if dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    eprintln!("sluice-loadgen: building {name}: {build:?}");
    let status = build
        .status()
        .with_context(|| format!("running cargo build for {name}"))?;
    if !status.success() || !beside.is_file() {
        bail!(
            "building {name} failed ({status}); expected {}",
            beside.display()
        );
    }
    Ok(beside)
}

/// How to start the local server.
pub struct LocalOptions {
    pub kind: ServerKind,
    pub binary: PathBuf,
    pub cpus: Option<CpuSet>,
    /// `--set KEY=VALUE` pairs (`sluice` only).
    pub settings: Vec<(String, String)>,
    pub data_parent: PathBuf,
}

pub struct LocalBroker {
    /// The executable's name, for messages.
    pub name: &'static str,
    child: Option<Child>,
    pub bootstrap: String,
    pub command: String,
    log_path: PathBuf,
    rss: RssSampler,
    /// Holds the data directory and log; deleted on drop.
    temp: tempfile::TempDir,
}

fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr().context("finding a free port")?.port())
}

impl LocalBroker {
    pub fn start(options: &LocalOptions) -> anyhow::Result<LocalBroker> {
        std::fs::create_dir_all(&options.data_parent)
            .with_context(|| format!("creating {}", options.data_parent.display()))?;
        let name = options.kind.binary_name();
        let temp = tempfile::Builder::new()
            .prefix(&format!("sluice-loadgen-{name}"))
            .tempdir_in(&options.data_parent)
            .with_context(|| {
                format!("a temporary directory in {}", options.data_parent.display())
            })?;
        let data_dir = temp.path().join("data");
        let log_path = temp.path().join("broker.log");
        let port = free_port()?;
        let bootstrap = format!("127.0.0.1:{port}");
        let mut command = Command::new(&options.binary);
        command
            .arg("--listen")
            .arg(&bootstrap)
            .arg("--data-dir")
            .arg(&data_dir);
        match options.kind {
            ServerKind::Sluice => {
                command
                    .arg("--admin-listen")
                    .arg(format!("127.0.0.1:{}", free_port()?));
                if let Some(cpus) = &options.cpus {
                    command.arg("--cores").arg(cpus.to_sluice_cores());
                }
                for (key, value) in &options.settings {
                    command.arg("--set").arg(format!("{key}={value}"));
                }
            }
            ServerKind::Floor => {
                // One executor, as one Sluice shard, on the first of the CPUs.
                if let Some(cpus) = &options.cpus {
                    command.arg("--cpu").arg(cpus.first().to_string());
                }
            }
        }
        let log =
            File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let log_err = log.try_clone().context("broker log")?;
        command
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .current_dir(temp.path());
        if let Some(cpus) = options.cpus.clone() {
            // SAFETY: between fork and exec only async-signal-safe calls: prctl and
            // sched_setaffinity (through `pin_current_thread`, which allocates nothing).
            unsafe {
                command.pre_exec(move || {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                    cpus.pin_current_thread()
                });
            }
        } else {
            // SAFETY: prctl is async-signal-safe.
            unsafe {
                command.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                    Ok(())
                });
            }
        }
        let command_line = format!("{command:?}");
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", options.binary.display()))?;
        let pid = child.id();
        let mut broker = LocalBroker {
            name,
            child: Some(child),
            bootstrap,
            command: command_line,
            log_path,
            rss: RssSampler::start(pid),
            temp,
        };
        broker.wait_ready(port)?;
        Ok(broker)
    }

    fn wait_ready(&mut self, port: u16) -> anyhow::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let name = self.name;
            if let Some(status) = self
                .child_mut()?
                .try_wait()
                .with_context(|| format!("waiting for {name}"))?
            {
                bail!(
                    "{name} exited with {status} while starting\n{}",
                    self.describe()
                );
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "{name} not listening after {START_TIMEOUT:?}\n{}",
                    self.describe()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn child_mut(&mut self) -> anyhow::Result<&mut Child> {
        self.child
            .as_mut()
            .context("the broker was stopped already")
    }

    /// The broker's data directory (for the disk baseline).
    pub fn data_dir(&self) -> PathBuf {
        self.temp.path().join("data")
    }

    /// Starts a new RSS measurement (max from now on).
    pub fn reset_rss(&self) {
        self.rss.reset();
    }

    /// Process id of the broker while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Memory since the last `reset_rss`.
    pub fn rss(&self) -> Option<Rss> {
        self.rss.read()
    }

    /// SIGTERM, then wait (SIGKILL after `STOP_GRACE`).
    pub fn stop(mut self) -> anyhow::Result<ExitStatus> {
        let mut child = self
            .child
            .take()
            .context("the broker was stopped already")?;
        let pid = libc::pid_t::try_from(child.id()).context("broker pid")?;
        // SAFETY: kill(2) on our own child, which has not been reaped yet.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_GRACE;
        loop {
            let name = self.name;
            if let Some(status) = child
                .try_wait()
                .with_context(|| format!("waiting for {name} to stop"))?
            {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                eprintln!(
                    "sluice-loadgen: {name} still running {STOP_GRACE:?} after SIGTERM; SIGKILL"
                );
                child.kill().with_context(|| format!("killing {name}"))?;
                return child.wait().with_context(|| format!("waiting for {name}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The command line and the tail of the broker's log, for error messages.
    pub fn describe(&self) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
        format!(
            "command: {}\nlast {LOG_TAIL_LINES} lines of {}:\n{tail}",
            self.command,
            self.log_path.display()
        )
    }
}

impl Drop for LocalBroker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Best effort on an error path: the broker must not outlive loadgen.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Samples a process's VmRSS every `RSS_PERIOD` on its own thread.
struct RssSampler {
    stop: Arc<AtomicBool>,
    max_bytes: Arc<AtomicU64>,
    last_bytes: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let max_bytes = Arc::new(AtomicU64::new(0));
        let last_bytes = Arc::new(AtomicU64::new(0));
        let (s, m, l) = (stop.clone(), max_bytes.clone(), last_bytes.clone());
        let thread = std::thread::Builder::new()
            .name("rss-sampler".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    if let Some(rss) = procstat::rss_bytes(pid) {
                        l.store(rss, Ordering::Relaxed);
                        m.fetch_max(rss, Ordering::Relaxed);
                    }
                    std::thread::sleep(RSS_PERIOD);
                }
            })
            .ok();
        RssSampler {
            stop,
            max_bytes,
            last_bytes,
            thread,
        }
    }

    fn reset(&self) {
        self.max_bytes
            .store(self.last_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    fn read(&self) -> Option<Rss> {
        let end_bytes = self.last_bytes.load(Ordering::Relaxed);
        (end_bytes > 0).then(|| Rss {
            max_bytes: self.max_bytes.load(Ordering::Relaxed).max(end_bytes),
            end_bytes,
        })
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
