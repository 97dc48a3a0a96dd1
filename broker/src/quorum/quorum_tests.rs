//! The quorum on real sockets and directories: three voters in one process, each on its own
//! shard executor thread, on loopback ports, with temp dirs; and the transport against
//! strangers and malformed input.
//!
//! What these check: election, the order and completeness of committed entries on every
//! voter, a new election when the leader stops, the restart of a follower and of the old
//! leader on their directories and their catch-up, and that bad connections are
//! closed without harm. Not checked: timings (every wait is a wide bound), partitions other
//! than a stopped voter, snapshots (the test stays below `snapshot_after_entries`).

use super::transport::{TcpTransport, VoterSecurity, OUTBOUND_FRAMES_MAX};
use super::wire;
use bytes::Bytes;
use futures_lite::{future, AsyncReadExt, AsyncWriteExt};
use replication::raft::{Committed, ProposeError, QuorumStatus, RaftIndex, RaftTerm, Role};
use replication::runtime::{NodeId, Transport, TransportError};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tuning::config::BrokerConfig;

/// The widest wait of any step (behaviour is asserted, never timing).
const WAIT: Duration = Duration::from_secs(60);

/// Loopback ports free right now (bound to port 0, then released).
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local addr").port())
        .collect()
}

/// Applies entries by sending them to the test thread.
struct Recorder {
    applied: mpsc::Sender<(u64, Vec<u8>)>,
}

impl replication::raft::StateMachine for Recorder {
    type RestoreError = std::fmt::Error;
    fn apply(&mut self, index: RaftIndex, entry: &[u8]) {
        let _ = self.applied.send((index.0, entry.to_vec()));
    }
    fn snapshot(&self) -> Bytes {
        Bytes::new()
    }
    /// Only the empty snapshot every voter takes at its first applied entry (the first
    /// leader's empty one, before any proposal: the driver's first compaction); the test's
    /// entries are far fewer than a later compaction needs, so anything else is a bug.
    fn restore(&mut self, _: RaftIndex, snapshot: Bytes) -> Result<(), std::fmt::Error> {
        if snapshot.is_empty() {
            Ok(())
        } else {
            Err(std::fmt::Error)
        }
    }
    fn leader_changed(&mut self, _: Option<NodeId>, _: RaftTerm) {}
}

enum Command {
    Propose(Vec<u8>, mpsc::Sender<Result<Committed, ProposeError>>),
    Status(mpsc::Sender<QuorumStatus>),
    Stop,
}

/// One voter incarnation on its own executor thread.
struct Voter {
    commands: mpsc::Sender<Command>,
    applied: mpsc::Receiver<(u64, Vec<u8>)>,
    /// The entries this incarnation applied, in order.
    log: Vec<(u64, Vec<u8>)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Voter {
    fn start(config: BrokerConfig) -> Voter {
        let (commands, inbox) = mpsc::channel::<Command>();
        let (applied_tx, applied) = mpsc::channel();
        let (listen, closer) = config
            .controller_quorum_voters
            .iter()
            .find(|v| v.id == config.node_id)
            .map(|v| voter_listener(v.addr))
            .map_or((None, None), |(handoff, addr, closer)| {
                (Some((handoff, addr)), Some(closer))
            });
        let handle = crate::rt::LocalExecutorBuilder::default()
            .name(&format!("voter-{}", config.node_id))
            .spawn(move || async move {
                let recorder = Recorder {
                    applied: applied_tx,
                };
                let node = super::start(
                    &config,
                    recorder,
                    listen,
                    Rc::new(|_| None),
                    VoterSecurity::default(),
                    None,
                )
                .await
                .expect("quorum starts");
                loop {
                    match inbox.try_recv() {
                        Ok(Command::Propose(entry, reply)) => {
                            let proposal = node.propose(Bytes::from(entry));
                            crate::rt::spawn_local(async move {
                                let _ = reply.send(proposal.await);
                            })
                            .detach();
                        }
                        Ok(Command::Status(reply)) => {
                            let _ = reply.send(node.status());
                        }
                        Ok(Command::Stop) | Err(mpsc::TryRecvError::Disconnected) => break,
                        Err(mpsc::TryRecvError::Empty) => {
                            crate::rt::sleep(Duration::from_millis(2)).await;
                        }
                    }
                }
                node.stop();
                while node.status().stopped.is_none() {
                    crate::rt::sleep(Duration::from_millis(2)).await;
                }
                // The driver dropped its transport: let the cancelled tasks close their sockets,
                // and close the listener, as a stopping broker does.
                crate::rt::sleep(Duration::from_millis(50)).await;
                if let Some(closer) = closer {
                    closer.close();
                }
            })
            .expect("executor starts");
        let thread = std::thread::spawn(move || handle.join().expect("voter thread"));
        Voter {
            commands,
            applied,
            log: Vec::new(),
            thread: Some(thread),
        }
    }

    fn status(&self) -> Option<QuorumStatus> {
        let (tx, rx) = mpsc::channel();
        self.commands.send(Command::Status(tx)).ok()?;
        rx.recv_timeout(WAIT).ok()
    }

    fn propose(&self, entry: &[u8]) -> Result<Committed, ProposeError> {
        let (tx, rx) = mpsc::channel();
        self.commands
            .send(Command::Propose(entry.to_vec(), tx))
            .expect("voter runs");
        rx.recv_timeout(WAIT).expect("the proposal resolves")
    }

    /// Takes what was applied so far into `log`.
    fn drain(&mut self) {
        while let Ok(entry) = self.applied.try_recv() {
            self.log.push(entry);
        }
    }

    fn stop(mut self) {
        let _ = self.commands.send(Command::Stop);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("voter thread ends");
        }
    }
}

fn config(node: i32, voters: &str, dir: &std::path::Path) -> BrokerConfig {
    let mut config = BrokerConfig::default();
    config
        .set_all([
            ("node.id", node.to_string().as_str()),
            ("controller.quorum.voters", voters),
            ("log.dirs", dir.to_str().expect("utf-8 temp dir")),
        ])
        .expect("valid config");
    config
}

/// Waits until `check` holds, up to [`WAIT`].
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The leader all running voters agree on, once they do.
fn agreed_leader(voters: &BTreeMap<i32, Voter>) -> i32 {
    let mut leader = None;
    eventually("one leader that every voter follows", || {
        let statuses: Vec<QuorumStatus> = voters.values().filter_map(Voter::status).collect();
        let leaders: Vec<Option<NodeId>> = statuses.iter().map(|s| s.leader).collect();
        let Some(Some(first)) = leaders.first().copied() else {
            return false;
        };
        let one_leader = statuses.iter().filter(|s| s.role == Role::Leader).count() == 1;
        leader = Some(first.0);
        one_leader && statuses.len() == voters.len() && leaders.iter().all(|l| *l == Some(first))
    });
    leader.expect("a leader")
}

/// Proposes `entry` on the leader until it commits (retrying after a change of leader).
fn commit(voters: &BTreeMap<i32, Voter>, entry: &[u8]) -> Committed {
    let deadline = Instant::now() + WAIT;
    loop {
        let leader = agreed_leader(voters);
        match voters[&leader].propose(entry) {
            Ok(committed) => return committed,
            // Neither committed: safe to propose again.
            Err(ProposeError::NotLeader { .. } | ProposeError::Dropped) => {
                assert!(Instant::now() < deadline, "entry never committed");
            }
            Err(e) => panic!("proposal failed: {e}"),
        }
    }
}

fn entry(i: usize) -> Vec<u8> {
    format!("entry-{i}").into_bytes()
}

/// Waits until every voter applied `want` (and nothing else), in order.
fn all_applied(voters: &mut BTreeMap<i32, Voter>, want: &[Vec<u8>]) {
    eventually("every voter to apply every entry", || {
        voters.values_mut().for_each(Voter::drain);
        voters.values().all(|v| v.log.len() >= want.len())
    });
    for (id, voter) in voters.iter() {
        let entries: Vec<&Vec<u8>> = voter.log.iter().map(|(_, e)| e).collect();
        let want: Vec<&Vec<u8>> = want.iter().collect();
        assert_eq!(
            entries, want,
            "voter {id} applied these entries in this order"
        );
        assert!(
            voter.log.windows(2).all(|w| w[0].0 < w[1].0),
            "voter {id}: indexes increase"
        );
    }
}

#[test]
fn three_voters_elect_commit_and_restarted_voters_catch_up() {
    let ports = free_ports(3);
    let voters_key = (1..=3)
        .zip(&ports)
        .map(|(id, port)| format!("{id}@127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    let dirs: Vec<tempfile::TempDir> = (0..3)
        .map(|_| tempfile::tempdir().expect("temp dir"))
        .collect();
    let configs: BTreeMap<i32, BrokerConfig> = (1..=3)
        .map(|id| (id, config(id, &voters_key, dirs[(id - 1) as usize].path())))
        .collect();
    let mut voters: BTreeMap<i32, Voter> = configs
        .iter()
        .map(|(id, c)| (*id, Voter::start(c.clone())))
        .collect();

    let mut proposed = Vec::new();
    for i in 0..100 {
        proposed.push(entry(i));
        commit(&voters, &entry(i));
    }
    all_applied(&mut voters, &proposed);
    // The index each entry got is the same everywhere.
    let indexes: Vec<Vec<u64>> = voters
        .values()
        .map(|v| v.log.iter().map(|(i, _)| *i).collect())
        .collect();
    assert!(indexes.windows(2).all(|w| w[0] == w[1]), "same indexes");

    // Stop a follower; the two others go on committing.
    let leader = agreed_leader(&voters);
    let stopped = *voters.keys().find(|id| **id != leader).expect("a follower");
    voters.remove(&stopped).expect("running").stop();
    let log = dirs[(stopped - 1) as usize]
        .path()
        .join(super::dir::QUORUM_DIR_NAME)
        .join(replication::raft::LOG_FILE);
    let log_bytes = std::fs::metadata(&log).expect("the voter's log").len();
    assert!(log_bytes > 0, "{} holds the voter's state", log.display());
    for i in 100..120 {
        proposed.push(entry(i));
        commit(&voters, &entry(i));
    }
    // Restarted on its directory, it replays its log, rejoins and catches up.
    voters.insert(stopped, Voter::start(configs[&stopped].clone()));
    all_applied(&mut voters, &proposed);
    // Stop the leader: the two others elect one of them and go on; restarted, the old
    // leader follows and catches up too.
    let leader = agreed_leader(&voters);
    voters.remove(&leader).expect("running").stop();
    for i in 120..130 {
        proposed.push(entry(i));
        commit(&voters, &entry(i));
    }
    assert_ne!(agreed_leader(&voters), leader, "a new leader");
    voters.insert(leader, Voter::start(configs[&leader].clone()));
    for i in 130..135 {
        proposed.push(entry(i));
        commit(&voters, &entry(i));
    }
    all_applied(&mut voters, &proposed);
    // Wipe a follower's quorum directory: restarted empty, it must survive the leader's
    // heartbeats, which name a commit past its empty log (raft-rs panicked on them), and
    // catch up from the leader once new entries come.
    let leader = agreed_leader(&voters);
    let wiped = *voters.keys().find(|id| **id != leader).expect("a follower");
    voters.remove(&wiped).expect("running").stop();
    std::fs::remove_dir_all(
        dirs[(wiped - 1) as usize]
            .path()
            .join(super::dir::QUORUM_DIR_NAME),
    )
    .expect("wiping the follower's quorum directory");
    voters.insert(wiped, Voter::start(configs[&wiped].clone()));
    eventually(
        "the wiped follower to hear a heartbeat past its log",
        || {
            voters[&wiped]
                .status()
                .is_some_and(|s| s.commits_beyond_log > 0)
        },
    );
    for i in 135..140 {
        proposed.push(entry(i));
        commit(&voters, &entry(i));
    }
    all_applied(&mut voters, &proposed);
    for (id, voter) in &voters {
        let status = voter.status().expect("running");
        assert_eq!(status.frames_refused, 0, "voter {id}: every frame decoded");
    }
    for (_, voter) in std::mem::take(&mut voters) {
        voter.stop();
    }
}

#[test]
fn a_lone_voter_commits_without_a_listener() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut voters = BTreeMap::from([(0, Voter::start(config(0, "", dir.path())))]);
    let committed = commit(&voters, b"alone");
    assert!(committed.index.0 >= 1);
    all_applied(&mut voters, &[b"alone".to_vec()]);
    for (_, voter) in voters {
        voter.stop();
    }
}

/// Runs `test` on a fresh shard executor.
fn on_executor<F>(test: impl FnOnce() -> F + Send + 'static)
where
    F: std::future::Future<Output = ()> + 'static,
{
    crate::rt::on_executor(test);
}

/// Whether the peer closed `stream` (read gives 0 bytes or an error) within [`WAIT`].
async fn closed_by_peer(stream: &mut crate::rt::TcpStream) -> bool {
    let read = async {
        let mut buf = [0; 64];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(_) => continue,
            }
        }
    };
    future::or(read, async {
        crate::rt::sleep(WAIT).await;
        false
    })
    .await
}

/// A voter listener on `addr`, as `runtime::bind_listeners` binds one, with its closer.
fn voter_listener(
    addr: SocketAddr,
) -> (
    crate::listener::Handoff,
    SocketAddr,
    crate::listener::Closer,
) {
    let bound = crate::listener::bind("test voter", addr).expect("bind");
    let (closer, mut handoffs) = bound.serve(1).expect("serve");
    (handoffs.pop().expect("one handoff"), addr, closer)
}

#[test]
fn strangers_and_malformed_frames_are_closed_and_voters_still_heard() {
    let ports = free_ports(2);
    let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let (one, two) = (addr(ports[0]), addr(ports[1]));
    on_executor(move || async move {
        let (h1, _, _c1) = voter_listener(one);
        let (h2, _, _c2) = voter_listener(two);
        // Voter 1 answers forwarded requests: each frame back, reversed, with its length.
        let echo = super::transport::ForwardedRequests {
            frame_bytes_max: 16,
            serve: Rc::new(|frame: Bytes, _peer| {
                Box::pin(async move {
                    let mut reply = u32::try_from(frame.len()).ok()?.to_be_bytes().to_vec();
                    reply.extend(frame.iter().rev());
                    Some(Bytes::from(reply))
                })
            }),
        };
        let t1 = TcpTransport::start(
            NodeId(1),
            Some((h1, one)),
            &BTreeMap::from([(NodeId(2), two)]),
            Rc::new(|_| None),
            VoterSecurity::default(),
            Some(echo),
        );
        assert_eq!(t1.local_addr(), Some(one));
        // Voter 1 is not among t2's configured peers: t2 finds it through its resolver, as a
        // controller that a voter change added.
        let t2 = TcpTransport::start(
            NodeId(2),
            Some((h2, two)),
            &BTreeMap::new(),
            Rc::new(move |node: NodeId| (node == NodeId(1)).then_some(one)),
            VoterSecurity::default(),
            None,
        );
        let connect = || crate::rt::TcpStream::connect(one);

        // Forwarded requests on the voter listener: answered in order on one connection; a
        // frame beyond the handler's bound closes it; a transport without a handler closes
        // a connection that sends no hello.
        let mut stream = connect().await.expect("connect");
        for body in [&b"abc"[..], &b"xy"[..]] {
            let mut frame = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
            frame.extend_from_slice(body);
            stream.write_all(&frame).await.expect("write");
            stream.flush().await.expect("flush");
            let mut reply = vec![0; 4 + body.len()];
            stream.read_exact(&mut reply).await.expect("answered");
            let reversed: Vec<u8> = body.iter().rev().copied().collect();
            assert_eq!(&reply[4..], &reversed[..]);
        }
        stream.write_all(&[0, 0, 0, 17]).await.expect("write");
        stream.flush().await.expect("flush");
        assert!(closed_by_peer(&mut stream).await, "17 bytes > 16 is closed");
        let mut stream = crate::rt::TcpStream::connect(two).await.expect("connect");
        stream
            .write_all(&[0, 0, 0, 3, 1, 2, 3])
            .await
            .expect("write");
        stream.flush().await.expect("flush");
        assert!(closed_by_peer(&mut stream).await, "no handler on voter 2");

        let mut hello = wire::encode_hello(NodeId(2)).to_vec();
        let mut bad_frame = hello.clone();
        bad_frame.extend_from_slice(&[0, 0, 0, 0]); // a zero-length frame
        let mut huge_frame = hello.clone();
        huge_frame.extend_from_slice(&[0xff; 4]);
        let mut torn_then_closed = hello.clone();
        torn_then_closed.extend_from_slice(&[0, 0, 0, 9, 1]);
        for (what, bytes) in [
            ("an HTTP client", b"GET / HTTP/1.1\r\n\r\n".to_vec()),
            ("a hello of another version", {
                let mut h = hello.clone();
                h[4] = wire::HELLO_VERSION + 1;
                h
            }),
            (
                "a hello naming a negative node id",
                wire::encode_hello(NodeId(-3)).to_vec(),
            ),
            (
                "a hello naming the node itself",
                wire::encode_hello(NodeId(1)).to_vec(),
            ),
            ("a zero-length frame", bad_frame),
            ("a frame beyond the bound", huge_frame),
        ] {
            let mut stream = connect().await.expect("connect");
            stream.write_all(&bytes).await.expect("write");
            stream.flush().await.expect("flush");
            assert!(closed_by_peer(&mut stream).await, "{what} is closed");
        }
        // A torn frame at the end of a connection delivers nothing.
        let mut stream = connect().await.expect("connect");
        stream.write_all(&torn_then_closed).await.expect("write");
        drop(stream);

        // A well-formed connection from voter 2 is heard, frame by frame.
        let mut older = connect().await.expect("connect");
        hello.extend_from_slice(&wire::encode_frame_length(3).expect("length"));
        hello.extend_from_slice(b"abc");
        older.write_all(&hello).await.expect("write");
        older.flush().await.expect("flush");
        let (from, frame) = t1.recv().await;
        assert_eq!((from, &frame[..]), (NodeId(2), &b"abc"[..]));
        // Voter 2's newer connection replaces that one.
        let mut stream = connect().await.expect("connect");
        stream.write_all(&hello).await.expect("write");
        stream.flush().await.expect("flush");
        let (from, frame) = t1.recv().await;
        assert_eq!((from, &frame[..]), (NodeId(2), &b"abc"[..]));
        assert!(
            closed_by_peer(&mut older).await,
            "the older connection is closed"
        );

        // A node outside the configured voters (one a voter change added) is heard too.
        let mut added = wire::encode_hello(NodeId(9)).to_vec();
        added.extend_from_slice(&wire::encode_frame_length(3).expect("length"));
        added.extend_from_slice(b"new");
        let mut newcomer = connect().await.expect("connect");
        newcomer.write_all(&added).await.expect("write");
        newcomer.flush().await.expect("flush");
        let (from, frame) = t1.recv().await;
        assert_eq!((from, &frame[..]), (NodeId(9), &b"new"[..]));

        // Between two transports, both ways (t2's writer connects to t1 as voter 2: that
        // connection replaces `stream` in turn).
        t2.send(NodeId(1), Bytes::from_static(b"to one"))
            .expect("queued");
        let (from, frame) = t1.recv().await;
        assert_eq!((from, &frame[..]), (NodeId(2), &b"to one"[..]));
        t1.send(NodeId(2), Bytes::from_static(b"to two"))
            .expect("queued");
        let (from, frame) = t2.recv().await;
        assert_eq!((from, &frame[..]), (NodeId(1), &b"to two"[..]));
        // A recv dropped before a frame arrived loses nothing.
        assert!(future::poll_once(t2.recv()).await.is_none());
        t1.send(NodeId(2), Bytes::from_static(b"again"))
            .expect("queued");
        assert_eq!(&t2.recv().await.1[..], b"again");

        // Refusals: unknown node, empty frame, full queue (nothing yields in between, so
        // the writer cannot drain).
        assert_eq!(
            t1.send(NodeId(7), Bytes::from_static(b"x")),
            Err(TransportError::Unreachable { to: NodeId(7) })
        );
        assert_eq!(
            t1.send(NodeId(2), Bytes::new()),
            Err(TransportError::Unreachable { to: NodeId(2) })
        );
        for _ in 0..OUTBOUND_FRAMES_MAX {
            t1.send(NodeId(2), Bytes::from_static(b"x")).expect("room");
        }
        assert_eq!(
            t1.send(NodeId(2), Bytes::from_static(b"x")),
            Err(TransportError::QueueFull { to: NodeId(2) })
        );

        // Dropped, the transport closes its listener (and its connections).
        drop(t1);
        let deadline = Instant::now() + WAIT;
        while connect().await.is_ok() {
            assert!(Instant::now() < deadline, "the listener stays open");
            crate::rt::sleep(Duration::from_millis(10)).await;
        }
        drop(stream);
    });
}
