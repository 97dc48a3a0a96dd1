//! The broker's listening sockets (Kafka, admin HTTP, controller quorum voter): bound once per
//! process, before the shards start, and accepted on a plain thread — never through io_uring.
//!
//! Why (issue #25, DESIGN.md §12): a socket that an io_uring request still references (a
//! pending accept) outlives its process. The kernel tears a dead process's rings down
//! asynchronously, so for ~20 ms after a SIGKILL — and after a clean exit — its listening
//! socket still took connections into a backlog nobody would ever serve, and a broker started
//! again at once on the same port was told the address was in use. Here:
//!
//! - [`bind`] binds without `SO_REUSEPORT` (with `SO_REUSEADDR`, as Kafka's acceptor): no
//!   second socket, ours or a dying one's, can ever share the port, so the kernel never puts a
//!   connection meant for this broker into a socket nobody serves. A port still held is
//!   looked up in `/proc`: a live process's listener refuses the start at once, naming the
//!   address and the process; a listener no process holds (an exited process's socket that
//!   its io_uring ring still references) is waited for, at most [`RELEASE_WAIT`].
//! - One accept thread per listener ([`Bound::serve`]) blocks in `accept(2)` and hands each
//!   connection's descriptor to a consuming shard in turn, over a socketpair; the shard wraps
//!   it as a runtime stream (`crate::rt::TcpStream`) ([`Incoming::accept`]). No io_uring request ever references the
//!   listening socket, so the kernel closes it inside the process's exit, before its parent
//!   can see the exit: a restart binds at once.
//! - [`Closer::close`] shuts the listening socket down (`shutdown(2)` on a listener unhashes
//!   it at once and resets what its backlog holds) when the broker stops accepting, so nothing
//!   is accepted during the drain either.
//!
//! Back-pressure: a shard that does not take its connections fills its socketpair's buffer
//! (a few thousand descriptors), then the accept thread blocks and the kernel backlog
//! (`LISTEN_BACKLOG`) bounds the rest.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::unix::io::{AsRawFd, FromRawFd, IntoRawFd, RawFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_lite::AsyncReadExt;

/// Longest [`bind`] waits for a listening socket that no live process holds (an exited
/// process's, still referenced by its io_uring ring while the kernel tears it down; measured
/// here: 6–20 ms).
pub const RELEASE_WAIT: Duration = Duration::from_secs(3);

/// Pause between two binds while a released socket is awaited.
const RELEASE_POLL: Duration = Duration::from_millis(5);

/// The kernel accept backlog of each listener, in connections (the runtime's and Kafka's order).
const LISTEN_BACKLOG: i32 = 1024;

/// Pause after a failed `accept(2)` (EMFILE, ENFILE, ENOBUFS) so the thread does not spin.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// Why a listener could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// A live process listens on the address (Kafka's "Address already in use").
    #[error(
        "{what} {addr}: address already in use: process {pid} ({command}) listens there \
         (another broker?)"
    )]
    HeldByProcess {
        what: &'static str,
        addr: SocketAddr,
        pid: u32,
        command: String,
    },
    /// The address stayed in use for [`RELEASE_WAIT`] and no process this user can see holds
    /// it.
    #[error(
        "{what} {addr}: address already in use: still listened on after {waited_ms} ms, by no \
         process this user can inspect (another user's process?)"
    )]
    StillInUse {
        what: &'static str,
        addr: SocketAddr,
        waited_ms: u128,
    },
    /// Any other bind or listen error.
    #[error("{what} {addr}: {source}")]
    Io {
        what: &'static str,
        addr: SocketAddr,
        source: io::Error,
    },
}

/// A bound, listening socket not yet accepted on.
#[derive(Debug)]
pub struct Bound {
    what: &'static str,
    socket: Arc<std::net::TcpListener>,
    local: SocketAddr,
}

/// Binds `addr` (`what` names it in errors and logs: "Kafka listener", …). Blocking: call
/// before the executors start. Waits at most [`RELEASE_WAIT`] for an exited process's
/// listening socket to go; see the module docs.
///
/// # Errors
/// [`ListenError::HeldByProcess`] at once when a live process listens there;
/// [`ListenError::StillInUse`] after the wait; [`ListenError::Io`] for any other failure.
pub fn bind(what: &'static str, addr: SocketAddr) -> Result<Bound, ListenError> {
    let started = Instant::now();
    let mut waited_logged = false;
    loop {
        match bind_once(addr) {
            Ok(socket) => {
                let local =
                    socket
                        .local_addr()
                        .map_err(|source| ListenError::Io { what, addr, source })?;
                if waited_logged {
                    tracing::info!(
                        what,
                        %addr,
                        waited_ms = started.elapsed().as_millis(),
                        "bound after an exited process's listening socket closed"
                    );
                }
                return Ok(Bound {
                    what,
                    socket: Arc::new(socket),
                    local,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                if let Some((pid, command)) = live_holder(addr) {
                    return Err(ListenError::HeldByProcess {
                        what,
                        addr,
                        pid,
                        command,
                    });
                }
                if started.elapsed() >= RELEASE_WAIT {
                    return Err(ListenError::StillInUse {
                        what,
                        addr,
                        waited_ms: started.elapsed().as_millis(),
                    });
                }
                if !waited_logged {
                    tracing::info!(
                        what,
                        %addr,
                        "the address is held by a listening socket no process holds (an exited \
                         process's, being torn down): waiting for it to close"
                    );
                    waited_logged = true;
                }
                std::thread::sleep(RELEASE_POLL);
            }
            Err(source) => return Err(ListenError::Io { what, addr, source }),
        }
    }
}

fn bind_once(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // SO_REUSEADDR lets the port be bound beside connections of an earlier process still in
    // TIME_WAIT (never beside a listener); SO_REUSEPORT is deliberately not set.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

impl Bound {
    /// The address bound (the real port when `addr` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Starts the accept thread, which hands connections to `consumers` shards in turn (at
    /// least one). Returns the closer and one [`Handoff`] per consumer, to be turned into an
    /// [`Incoming`] on that consumer's executor.
    ///
    /// # Errors
    /// The socketpairs or the thread could not be created.
    pub fn serve(self, consumers: usize) -> io::Result<(Closer, Vec<Handoff>)> {
        assert!(consumers > 0, "a listener needs a shard to serve it");
        let mut ends = Vec::with_capacity(consumers);
        let mut handoffs = Vec::with_capacity(consumers);
        for _ in 0..consumers {
            let (thread_end, shard_end) = StdUnixStream::pair()?;
            ends.push(Some(thread_end));
            handoffs.push(Handoff(shard_end));
        }
        let closer = Closer {
            socket: self.socket.clone(),
            closing: Arc::new(AtomicBool::new(false)),
        };
        let (socket, closing, what, local) =
            (self.socket, closer.closing.clone(), self.what, self.local);
        std::thread::Builder::new()
            .name(format!("sluice-accept-{}", local.port()))
            .spawn(move || accept_thread(&socket, ends, &closing, what))?;
        Ok((closer, handoffs))
    }
}

/// Accepts until the listener is shut down, handing each connection to the next consumer
/// still there (a consumer whose end closed is dropped; with none left the thread shuts the
/// listener down and ends).
fn accept_thread(
    socket: &std::net::TcpListener,
    mut ends: Vec<Option<StdUnixStream>>,
    closing: &AtomicBool,
    what: &'static str,
) {
    let mut next = 0;
    loop {
        let stream = match socket.accept() {
            Ok((stream, _)) => stream,
            Err(_) if closing.load(Ordering::Acquire) => return,
            Err(e) => {
                tracing::warn!(what, error = %e, "accept failed");
                std::thread::sleep(ACCEPT_RETRY_DELAY);
                continue;
            }
        };
        let fd = stream.into_raw_fd();
        let mut handed = false;
        for _ in 0..ends.len() {
            let slot = next;
            next = (next + 1) % ends.len();
            let Some(end) = ends[slot].as_mut() else {
                continue;
            };
            if end.write_all(&fd.to_ne_bytes()).is_ok() {
                handed = true;
                break;
            }
            ends[slot] = None;
        }
        if !handed {
            // SAFETY: `fd` came from `into_raw_fd` above and was handed to nobody.
            drop(unsafe { std::net::TcpStream::from_raw_fd(fd) });
            if ends.iter().all(Option::is_none) {
                // No consumer is left: stop listening rather than queue connections nobody
                // will take.
                closing.store(true, Ordering::Release);
                // SAFETY: the fd is open: `socket` keeps it alive.
                unsafe { libc::shutdown(socket.as_raw_fd(), libc::SHUT_RDWR) };
                return;
            }
        }
    }
}

/// Shuts a listener down (idempotent, from any thread).
#[derive(Clone, Debug)]
pub struct Closer {
    socket: Arc<std::net::TcpListener>,
    closing: Arc<AtomicBool>,
}

impl Closer {
    /// Stops accepting: `shutdown(2)` on the listening socket unhashes it at once (new
    /// connections are refused, its backlog reset) and ends the accept thread.
    pub fn close(&self) {
        if !self.closing.swap(true, Ordering::AcqRel) {
            // SAFETY: the fd is open: `self.socket` keeps it alive.
            unsafe { libc::shutdown(self.socket.as_raw_fd(), libc::SHUT_RDWR) };
        }
    }
}

/// A consumer's end of an accept thread's handoff, to move to its executor.
#[derive(Debug)]
pub struct Handoff(StdUnixStream);

impl Handoff {
    /// The consumer's stream of connections. Must be called on a shard executor.
    pub fn incoming(self) -> Incoming {
        // SAFETY: the descriptor is owned by `self.0` and moved into the runtime's stream.
        let stream = unsafe { crate::rt::UnixStream::from_raw_fd(self.0.into_raw_fd()) };
        Incoming(stream)
    }
}

/// Connections accepted for one shard.
pub struct Incoming(crate::rt::UnixStream);

impl Incoming {
    /// The next connection, as a runtime stream on this executor.
    ///
    /// # Errors
    /// The accept thread ended (the listener was closed) or the handoff failed.
    pub async fn accept(&mut self) -> io::Result<crate::rt::TcpStream> {
        let mut fd = [0u8; std::mem::size_of::<RawFd>()];
        self.0.read_exact(&mut fd).await?;
        let fd = RawFd::from_ne_bytes(fd);
        // SAFETY: the accept thread wrote the descriptor of a connection it accepted and
        // handed to this consumer alone.
        Ok(unsafe { crate::rt::TcpStream::from_raw_fd(fd) })
    }
}

/// The live process (pid, command name) holding a listening socket on `addr`, if one can be
/// seen in `/proc` (`None` also when `/proc` cannot be read).
fn live_holder(addr: SocketAddr) -> Option<(u32, String)> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(table) {
            inodes.extend(listening_inodes(&text, addr));
        }
    }
    if inodes.is_empty() {
        return None;
    }
    let targets: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(link) = std::fs::read_link(fd.path()) else {
                continue;
            };
            if targets.iter().any(|t| link.as_os_str() == t.as_str()) {
                let command = std::fs::read_to_string(entry.path().join("comm"))
                    .map(|c| c.trim().to_owned())
                    .unwrap_or_else(|_| "?".to_owned());
                return Some((pid, command));
            }
        }
    }
    None
}

/// The socket inodes of `/proc/net/tcp{,6}` rows (`text`) in state LISTEN (`0A`) whose local
/// address would conflict with binding `addr`: the same port, and the same address or either
/// one unspecified (IPv4 addresses compared also as IPv4-mapped IPv6 ones).
fn listening_inodes(text: &str, addr: SocketAddr) -> Vec<u64> {
    let mut found = Vec::new();
    for line in text.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(local), Some(state), Some(inode)) = (fields.get(1), fields.get(3), fields.get(9))
        else {
            continue;
        };
        if *state != "0A" {
            continue;
        }
        let Some((ip_hex, port_hex)) = local.split_once(':') else {
            continue;
        };
        let (Ok(port), Some(ip), Ok(inode)) = (
            u16::from_str_radix(port_hex, 16),
            parse_proc_ip(ip_hex),
            inode.parse::<u64>(),
        ) else {
            continue;
        };
        if port == addr.port() && conflicts(ip, addr.ip()) {
            found.push(inode);
        }
    }
    found
}

/// An address of `/proc/net/tcp` (8 hex digits, a little-endian u32) or `tcp6` (32 hex digits,
/// four such words).
fn parse_proc_ip(hex: &str) -> Option<std::net::IpAddr> {
    // Each 32-bit word is printed in host byte order.
    let word = |i: usize| {
        u32::from_str_radix(hex.get(i * 8..i * 8 + 8)?, 16)
            .ok()
            .map(u32::to_ne_bytes)
    };
    match hex.len() {
        8 => Some(std::net::Ipv4Addr::from(word(0)?).into()),
        32 => {
            let mut octets = [0u8; 16];
            for (i, chunk) in octets.chunks_mut(4).enumerate() {
                chunk.copy_from_slice(&word(i)?);
            }
            Some(std::net::Ipv6Addr::from(octets).into())
        }
        _ => None,
    }
}

fn conflicts(listening: std::net::IpAddr, wanted: std::net::IpAddr) -> bool {
    let canonical = |ip: std::net::IpAddr| match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
        v4 => v4,
    };
    let (listening, wanted) = (canonical(listening), canonical(wanted));
    listening.is_unspecified() || wanted.is_unspecified() || listening == wanted
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:4A94 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:4A94 0100007F:D2A0 01 00000000:00000000 00:00000000 00000000     0        0 2222 1 0000000000000000 20 4 30 10 -1
   2: 00000000:4CBC 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3333 1 0000000000000000 100 0 0 10 0
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:4A94 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4444 1 0000000000000000 100 0 0 10 0
";

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn proc_addresses_parse_as_the_kernel_prints_them() {
        assert_eq!(parse_proc_ip("0100007F"), Some(addr("127.0.0.1:0").ip()));
        assert_eq!(
            parse_proc_ip("00000000000000000000000001000000"),
            Some(addr("[::1]:0").ip())
        );
        assert_eq!(parse_proc_ip("zz"), None);
    }

    #[test]
    fn only_listening_rows_on_a_conflicting_address_count() {
        // 127.0.0.1:19092 listens (1111); the established row on that port (2222) does not.
        assert_eq!(listening_inodes(TCP, addr("127.0.0.1:19092")), vec![1111]);
        // A wildcard listener (0.0.0.0:19644) conflicts with any address on its port.
        assert_eq!(listening_inodes(TCP, addr("127.0.0.2:19644")), vec![3333]);
        assert!(listening_inodes(TCP, addr("127.0.0.2:19092")).is_empty());
        assert_eq!(listening_inodes(TCP6, addr("[::1]:19092")), vec![4444]);
        assert!(listening_inodes(TCP6, addr("127.0.0.1:19092")).is_empty());
        assert!(listening_inodes("header only\n", addr("127.0.0.1:1")).is_empty());
    }

    #[test]
    fn a_live_listener_is_refused_at_once_naming_its_process() {
        let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = holder.local_addr().unwrap();
        let started = Instant::now();
        let err = bind("Kafka listener", at).unwrap_err();
        assert!(
            started.elapsed() < RELEASE_WAIT,
            "no wait for a live holder"
        );
        match &err {
            ListenError::HeldByProcess { pid, .. } => assert_eq!(*pid, std::process::id()),
            other => panic!("expected HeldByProcess, got {other:?}"),
        }
        let text = err.to_string();
        assert!(text.contains(&at.to_string()) && text.contains("address already in use"));
    }

    #[test]
    fn a_listener_whose_consumers_are_gone_stops_listening() {
        let bound = bind("test listener", addr("127.0.0.1:0")).unwrap();
        let at = bound.local_addr();
        let (_closer, handoffs) = bound.serve(1).unwrap();
        drop(handoffs);
        // The first connection finds no consumer; from then on nothing listens.
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(at).is_ok() {
            assert!(Instant::now() < deadline, "still listening");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_closed_listener_frees_the_port_at_once_and_refuses_connections() {
        let bound = bind("test listener", addr("127.0.0.1:0")).unwrap();
        let at = bound.local_addr();
        let (closer, handoffs) = bound.serve(1).unwrap();
        closer.close();
        assert!(std::net::TcpStream::connect(at).is_err(), "nothing accepts");
        drop(handoffs);
        let again = bind("test listener", at).unwrap();
        assert_eq!(again.local_addr(), at);
    }
}
