//! Tests of the broker lifecycle (register, unfence, fence, controlled shutdown, unregister)
//! and of replica placement: one unit test per op and refusal, and a model test that runs
//! random op sequences and checks the partition invariants after each step.
//!
//! What the checkers verify: leaders are active members of their ISR; inactive brokers are
//! only ever the sole member of an ISR; ISR ⊆ replicas; leader epochs never go back and move
//! on every leader change; broker epochs only grow; the image's snapshot records rebuild it
//! and the log of changes replays to it; an accepted AlterPartition replaces the ISR and bumps
//! only the partition epoch (unit tests at the end check its refusals and their order), unless
//! it completes a reassignment; a reassignment (KIP-455) keeps its adding and removing lists
//! disjoint subsets of the replicas, starts the replicas with its target, completes only with
//! the whole target in sync and fences removed replicas with a new leader epoch, and a
//! cancellation returns to the original replicas. Not verified: heartbeats (see
//! `heartbeats.rs`).

use super::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

fn no_topic_check(_: &BTreeMap<String, String>) -> Result<(), String> {
    Ok(())
}

fn no_broker_check(_: &BTreeMap<String, BTreeMap<String, String>>) -> Result<(), String> {
    Ok(())
}

/// An image and the changes that built it, driven as the controller drives it.
struct Cluster {
    image: MetadataImage,
    /// The image the last [`Cluster::run`] proposed against (what an answer may read).
    before: MetadataImage,
    changes: Vec<Vec<MetadataRecord>>,
    /// Drawn for each created topic, so topic ids never repeat.
    next_topic_id: u128,
    placement_seed: u64,
    /// Brokers whose session is live, for [`ProposeContext::broker_session_live`].
    live: BTreeSet<i32>,
}

impl Cluster {
    fn new() -> Cluster {
        Cluster {
            image: MetadataImage::new("c".into()),
            before: MetadataImage::new("c".into()),
            changes: Vec::new(),
            next_topic_id: 1,
            placement_seed: 0,
            live: BTreeSet::new(),
        }
    }

    /// Proposes `op` and applies its records; returns them, or the refusal.
    fn run(&mut self, op: &ControllerOp) -> Result<Vec<MetadataRecord>, ControllerError> {
        let live = self.live.clone();
        let session_live = move |broker_id: i32| live.contains(&broker_id);
        let ctx = ProposeContext {
            broker_id: 1,
            controller_id: 0,
            broker_epoch: 0,
            new_topic_id: Uuid::from_u128(self.next_topic_id),
            check_topic_config: &no_topic_check,
            check_broker_configs: &no_broker_check,
            default_replication_factor: 2,
            placement_seed: self.placement_seed,
            broker_session_live: &session_live,
        };
        self.next_topic_id += 1;
        self.before = self.image.clone();
        let records = propose(&self.image, op, &ctx)?;
        for r in &records {
            self.image
                .apply(r)
                .unwrap_or_else(|e| panic!("invariant 'proposed records apply': {e} ({r:?})"));
        }
        if !records.is_empty() {
            self.changes.push(records.clone());
        }
        Ok(records)
    }

    /// Registers `broker_id` (incarnation `incarnation`) and returns its broker epoch.
    fn register(&mut self, broker_id: i32, incarnation: u128) -> Result<i64, ControllerError> {
        self.register_in(broker_id, incarnation, None)
    }

    /// [`Cluster::register`] with `broker.rack` `rack`.
    fn register_in(
        &mut self,
        broker_id: i32,
        incarnation: u128,
        rack: Option<&str>,
    ) -> Result<i64, ControllerError> {
        let op = ControllerOp::RegisterBroker {
            broker_id,
            incarnation_id: Uuid::from_u128(incarnation),
            end_points: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "localhost".into(),
                port: 9092,
                security_protocol: 0,
            }],
            rack: rack.map(str::to_string),
        };
        self.run(&op)?;
        match op.answer(&self.before, &self.image) {
            ControllerAnswer::Registered { broker_epoch } => Ok(broker_epoch),
            other => panic!("RegisterBroker answered {other:?}"),
        }
    }

    fn epoch(&self, broker_id: i32) -> i64 {
        self.image.brokers[&broker_id].broker_epoch
    }

    fn unfence(&mut self, broker_id: i32) -> Result<Vec<MetadataRecord>, ControllerError> {
        let broker_epoch = self.epoch(broker_id);
        self.run(&ControllerOp::UnfenceBroker {
            broker_id,
            broker_epoch,
        })
    }

    /// Brokers `ids`, registered and unfenced.
    fn with_brokers(ids: &[i32]) -> Cluster {
        let mut cluster = Cluster::new();
        for &id in ids {
            cluster
                .register(id, 100 + u128::try_from(id).unwrap())
                .unwrap();
            cluster.unfence(id).unwrap();
        }
        cluster
    }

    fn create(
        &mut self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        overrides: BTreeMap<String, String>,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        self.run(&ControllerOp::CreateTopic {
            assignment: None,
            name: name.into(),
            partitions,
            replication_factor,
            overrides,
            internal: false,
            validate_only: false,
        })
    }

    fn partition(&self, name: &str, p: usize) -> &PartitionImage {
        &self.image.topics[name].partitions[p]
    }
}

fn unclean(enabled: bool) -> BTreeMap<String, String> {
    BTreeMap::from([(
        UNCLEAN_LEADER_ELECTION_ENABLE.to_string(),
        enabled.to_string(),
    )])
}

#[test]
fn registration_hands_out_growing_epochs_and_starts_fenced() {
    let mut c = Cluster::new();
    let first = c.register(1, 10).unwrap();
    let second = c.register(2, 20).unwrap();
    assert!(second > first);
    assert!(
        c.image.brokers[&1].fenced,
        "a new registration starts fenced"
    );
    assert!(!c.image.brokers[&1].in_controlled_shutdown);
    assert!(c.image.next_broker_epoch > second);
    // A retry of the same incarnation: no record, the same answer.
    let changes = c.changes.len();
    assert_eq!(c.register(1, 10).unwrap(), first);
    assert_eq!(
        c.changes.len(),
        changes,
        "an idempotent retry appends nothing"
    );
    // Another incarnation while the first one's session is live.
    c.live.insert(1);
    assert!(matches!(
        c.register(1, 11),
        Err(ControllerError::DuplicateBrokerRegistration { broker_id: 1 })
    ));
    // Once the session is gone, the new incarnation replaces the old one with a new epoch.
    c.live.clear();
    let third = c.register(1, 11).unwrap();
    assert!(third > second);
    assert_eq!(c.image.brokers[&1].incarnation_id, Uuid::from_u128(11));
}

#[test]
fn a_replaced_registration_loses_its_leaderships() {
    let mut c = Cluster::with_brokers(&[1, 2]);
    c.create("t", 1, 2, BTreeMap::new()).unwrap();
    assert_eq!(c.partition("t", 0).leader, 1);
    // Broker 1 restarts before its session was noticed to expire (it was never fenced).
    c.register(1, 999).unwrap();
    let p = c.partition("t", 0);
    assert_eq!((p.leader, p.isr.clone(), p.leader_epoch), (2, vec![2], 1));
}

#[test]
fn records_for_a_stale_or_unknown_broker_epoch_are_refused_by_apply() {
    let mut c = Cluster::with_brokers(&[1]);
    let epoch = c.epoch(1);
    let before = c.image.clone();
    let stale = [
        MetadataRecord::FenceBroker(FenceBrokerRecord {
            broker_id: 1,
            broker_epoch: epoch - 1,
        }),
        MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
            broker_id: 1,
            broker_epoch: epoch + 1,
        }),
        MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
            broker_id: 1,
            broker_epoch: epoch - 1,
            fenced: Some(true),
            in_controlled_shutdown: None,
        }),
        MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
            broker_id: 1,
            broker_epoch: epoch - 1,
        }),
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: 1,
            incarnation_id: Uuid::from_u128(5),
            broker_epoch: epoch,
            end_points: Vec::new(),
            rack: None,
            fenced: true,
            in_controlled_shutdown: false,
        }),
    ];
    for r in &stale {
        assert!(
            matches!(
                c.image.apply(r),
                Err(ApplyError::StaleBrokerEpoch { broker_id: 1, current, .. }) if current == epoch
            ),
            "{r:?}"
        );
    }
    let unknown = MetadataRecord::FenceBroker(FenceBrokerRecord {
        broker_id: 7,
        broker_epoch: 0,
    });
    assert_eq!(
        c.image.apply(&unknown),
        Err(ApplyError::UnknownBroker { broker_id: 7 })
    );
    let backwards = MetadataRecord::NextBrokerEpoch(NextBrokerEpochRecord {
        next_broker_epoch: 0,
    });
    assert!(matches!(
        c.image.apply(&backwards),
        Err(ApplyError::BrokerEpochBackwards { .. })
    ));
    assert_eq!(c.image, before, "refused records change nothing");
}

#[test]
fn ops_with_a_stale_epoch_or_an_unknown_broker_are_refused() {
    let mut c = Cluster::with_brokers(&[1]);
    let epoch = c.epoch(1);
    let refused = c
        .run(&ControllerOp::ControlledShutdown {
            broker_id: 1,
            broker_epoch: epoch - 1,
        })
        .unwrap_err();
    assert!(matches!(
        refused,
        ControllerError::StaleBrokerEpoch { broker_id: 1, broker_epoch, current }
            if broker_epoch == epoch - 1 && current == epoch
    ));
    assert!(matches!(
        c.run(&ControllerOp::UnfenceBroker {
            broker_id: 1,
            broker_epoch: epoch + 1,
        }),
        Err(ControllerError::StaleBrokerEpoch { .. })
    ));
    for op in [
        ControllerOp::FenceBroker { broker_id: 3 },
        ControllerOp::UnregisterBroker { broker_id: 3 },
        ControllerOp::UnfenceBroker {
            broker_id: 3,
            broker_epoch: 0,
        },
    ] {
        assert!(
            matches!(
                c.run(&op),
                Err(ControllerError::UnknownBroker { broker_id: 3 })
            ),
            "{op:?}"
        );
    }
}

#[test]
fn placement_spreads_replicas_over_racks() {
    // Racks a {1, 2}, b {3, 4}, c {5, 6}.
    let mut c = Cluster::new();
    for id in 1..=6 {
        let rack = ["a", "b", "c"][usize::try_from(id - 1).unwrap() / 2];
        c.register_in(id, 100 + u128::try_from(id).unwrap(), Some(rack))
            .unwrap();
        c.unfence(id).unwrap();
    }
    let rack_of = |c: &Cluster, id: i32| c.image.brokers[&id].rack.clone();
    c.create("r", 6, 3, BTreeMap::new()).unwrap();
    let leaders: Vec<i32> = c.image.topics["r"]
        .partitions
        .iter()
        .map(|p| p.leader)
        .collect();
    assert_eq!(
        leaders,
        [1, 3, 5, 2, 4, 6],
        "leaders go round the racks, then their brokers"
    );
    for p in &c.image.topics["r"].partitions {
        let racks: BTreeSet<_> = p.replicas.iter().map(|&b| rack_of(&c, b)).collect();
        assert_eq!(racks.len(), 3, "one replica per rack: {:?}", p.replicas);
    }
    // A fenced broker's rack still has another; a broker without a rack is one more group
    // (Kafka's placer accepts the mix).
    c.run(&ControllerOp::FenceBroker { broker_id: 3 }).unwrap();
    c.register(7, 107).unwrap();
    c.unfence(7).unwrap();
    c.create("s", 8, 4, BTreeMap::new()).unwrap();
    for p in &c.image.topics["s"].partitions {
        assert!(!p.replicas.contains(&3), "{:?}", p.replicas);
        let racks: BTreeSet<_> = p.replicas.iter().map(|&b| rack_of(&c, b)).collect();
        assert_eq!(racks.len(), 4, "racks a, b, c and none: {:?}", p.replicas);
    }
}

#[test]
fn placement_is_round_robin_over_active_brokers() {
    let mut c = Cluster::with_brokers(&[1, 2, 3]);
    c.placement_seed = 4; // Starts at index 4 mod 3 = 1: broker 2.
    c.create("t", 4, 2, BTreeMap::new()).unwrap();
    let replicas: Vec<Vec<i32>> = c.image.topics["t"]
        .partitions
        .iter()
        .map(|p| p.replicas.clone())
        .collect();
    assert_eq!(replicas, [vec![2, 3], vec![3, 1], vec![1, 2], vec![2, 3]]);
    for p in &c.image.topics["t"].partitions {
        assert_eq!(p.isr, p.replicas);
        assert_eq!(p.leader, p.replicas[0]);
        assert_eq!((p.leader_epoch, p.partition_epoch), (0, 0));
    }
    // -1: the default (2 here); new partitions keep the topic's replication factor.
    c.placement_seed = 0;
    c.create("d", 1, -1, BTreeMap::new()).unwrap();
    assert_eq!(c.partition("d", 0).replicas, [1, 2]);
    c.run(&ControllerOp::CreatePartitions {
        assignment: None,
        name: "d".into(),
        total: 3,
        validate_only: false,
    })
    .unwrap();
    assert_eq!(c.partition("d", 1).replicas, [2, 3]);
    assert_eq!(c.partition("d", 2).replicas, [3, 1]);
    // A fenced broker and one in controlled shutdown get no replicas.
    c.run(&ControllerOp::FenceBroker { broker_id: 2 }).unwrap();
    let epoch = c.epoch(3);
    c.run(&ControllerOp::ControlledShutdown {
        broker_id: 3,
        broker_epoch: epoch,
    })
    .unwrap();
    c.create("one", 3, 1, BTreeMap::new()).unwrap();
    for p in &c.image.topics["one"].partitions {
        assert_eq!(p.replicas, [1]);
    }
}

#[test]
fn replication_factors_beyond_the_active_brokers_or_invalid_are_refused() {
    let mut c = Cluster::with_brokers(&[1, 2]);
    let refused = c.create("t", 1, 3, BTreeMap::new()).unwrap_err();
    assert!(matches!(
        refused,
        ControllerError::InvalidReplicationFactor {
            replication_factor: 3,
            available_brokers: 2
        }
    ));
    assert_eq!(
        refused.to_string(),
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 \
         cannot be reached because only 2 broker(s) are registered."
    );
    for rf in [0, -2, i16::MIN] {
        assert!(
            matches!(
                c.create("t", 1, rf, BTreeMap::new()),
                Err(ControllerError::InvalidReplicationFactor { .. })
            ),
            "{rf}"
        );
    }
    assert!(!c.image.topics.contains_key("t"));
    // Growing a topic of RF 2 once a broker is fenced.
    c.create("t", 1, 2, BTreeMap::new()).unwrap();
    c.run(&ControllerOp::FenceBroker { broker_id: 2 }).unwrap();
    assert!(matches!(
        c.run(&ControllerOp::CreatePartitions {
            assignment: None,
            name: "t".into(),
            total: 2,
            validate_only: false,
        }),
        Err(ControllerError::InvalidReplicationFactor {
            replication_factor: 2,
            available_brokers: 1
        })
    ));
    // No active broker at all.
    let mut empty = Cluster::new();
    assert!(matches!(
        empty.create("t", 1, 1, BTreeMap::new()),
        Err(ControllerError::InvalidReplicationFactor {
            available_brokers: 0,
            ..
        })
    ));
}

#[test]
fn fencing_moves_leaderships_to_the_isr_and_keeps_a_sole_member() {
    let mut c = Cluster::with_brokers(&[1, 2, 3]);
    c.create("t", 3, 3, BTreeMap::new()).unwrap();
    // Partition 0: [1, 2, 3]; 1: [2, 3, 1]; 2: [3, 1, 2].
    let records = c.run(&ControllerOp::FenceBroker { broker_id: 1 }).unwrap();
    assert!(matches!(records[0], MetadataRecord::FenceBroker(_)));
    assert!(c.image.brokers[&1].fenced);
    let p0 = c.partition("t", 0);
    assert_eq!(
        (p0.leader, p0.isr.clone(), p0.leader_epoch),
        (2, vec![2, 3], 1)
    );
    let p1 = c.partition("t", 1);
    assert_eq!(
        (p1.leader, p1.isr.clone(), p1.leader_epoch),
        (2, vec![2, 3], 0)
    );
    assert_eq!(p1.partition_epoch, 1, "the ISR shrank");
    c.run(&ControllerOp::FenceBroker { broker_id: 2 }).unwrap();
    c.run(&ControllerOp::FenceBroker { broker_id: 3 }).unwrap();
    // Broker 3 was the last member: it stays in the ISR, and no one leads.
    for p in &c.image.topics["t"].partitions {
        assert_eq!((p.leader, p.isr.clone()), (-1, vec![3]));
    }
    assert_eq!(c.partition("t", 0).leader_epoch, 3);
    // Fencing again changes nothing.
    assert!(c
        .run(&ControllerOp::FenceBroker { broker_id: 3 })
        .unwrap()
        .is_empty());
}

#[test]
fn unclean_election_picks_a_live_replica_outside_the_isr_only_when_enabled() {
    for enabled in [false, true] {
        let mut c = Cluster::with_brokers(&[1, 2]);
        c.create("t", 1, 2, unclean(enabled)).unwrap();
        c.run(&ControllerOp::FenceBroker { broker_id: 2 }).unwrap();
        c.unfence(2).unwrap();
        assert_eq!(
            c.partition("t", 0).isr,
            [1],
            "unfencing does not rejoin the ISR"
        );
        c.run(&ControllerOp::FenceBroker { broker_id: 1 }).unwrap();
        let p = c.partition("t", 0);
        if enabled {
            assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
        } else {
            assert_eq!((p.leader, p.isr.clone()), (-1, vec![1]));
        }
        assert_eq!(p.leader_epoch, 1, "one leader change, to 2 or to none");
    }
    // The cluster-wide dynamic default applies where the topic sets nothing.
    let mut c = Cluster::with_brokers(&[1, 2]);
    c.run(&ControllerOp::AlterBrokerConfig {
        resource_name: String::new(),
        changes: vec![(UNCLEAN_LEADER_ELECTION_ENABLE.into(), Some("true".into()))],
        replace: false,
        validate_only: false,
    })
    .unwrap();
    c.create("t", 1, 2, BTreeMap::new()).unwrap();
    c.run(&ControllerOp::FenceBroker { broker_id: 2 }).unwrap();
    c.unfence(2).unwrap();
    c.run(&ControllerOp::FenceBroker { broker_id: 1 }).unwrap();
    assert_eq!(c.partition("t", 0).leader, 2);
}

#[test]
fn unfencing_elects_the_broker_where_its_isr_is_leaderless() {
    let mut c = Cluster::with_brokers(&[1, 2]);
    c.create("t", 2, 2, BTreeMap::new()).unwrap();
    c.run(&ControllerOp::FenceBroker { broker_id: 1 }).unwrap();
    c.run(&ControllerOp::FenceBroker { broker_id: 2 }).unwrap();
    for p in &c.image.topics["t"].partitions {
        assert_eq!((p.leader, p.isr.clone()), (-1, vec![2]));
    }
    // Broker 1 is not in the ISR: unfencing it elects no one (unclean election is off).
    let records = c.unfence(1).unwrap();
    assert_eq!(
        records.len(),
        1,
        "only the UnfenceBrokerRecord: {records:?}"
    );
    let records = c.unfence(2).unwrap();
    assert_eq!(records.len(), 3, "unfence and two elections: {records:?}");
    let epochs: Vec<i32> = c.image.topics["t"]
        .partitions
        .iter()
        .map(|p| p.leader_epoch)
        .collect();
    // Partition 0 went 1 → 2 → none → 2, partition 1 (led by 2) went 2 → none → 2.
    assert_eq!(epochs, [3, 2]);
    for p in &c.image.topics["t"].partitions {
        assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    }
    // Unfencing an unfenced broker changes nothing.
    assert!(c.unfence(2).unwrap().is_empty());
}

#[test]
fn controlled_shutdown_moves_leaderships_first() {
    let mut c = Cluster::with_brokers(&[1, 2]);
    c.create("t", 2, 2, BTreeMap::new()).unwrap();
    c.create("solo", 1, 1, BTreeMap::new()).unwrap();
    assert_eq!(leaderships(&c.image, 1), 2);
    let broker_epoch = c.epoch(1);
    let op = ControllerOp::ControlledShutdown {
        broker_id: 1,
        broker_epoch,
    };
    let records = c.run(&op).unwrap();
    assert!(matches!(
        &records[0],
        MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
            in_controlled_shutdown: Some(true),
            fenced: None,
            ..
        })
    ));
    assert_eq!(
        op.answer(&c.before, &c.image),
        ControllerAnswer::ControlledShutdown {
            should_shut_down: true
        }
    );
    assert!(c.image.brokers[&1].in_controlled_shutdown);
    assert!(!c.image.brokers[&1].fenced);
    for p in &c.image.topics["t"].partitions {
        assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    }
    let solo = c.partition("solo", 0);
    assert_eq!((solo.leader, solo.isr.clone()), (-1, vec![1]));
    assert_eq!(leaderships(&c.image, 1), 0);
    // Asking again appends nothing and gives the same answer.
    assert!(c.run(&op).unwrap().is_empty());
    // A broker that still leads may not shut down.
    assert_eq!(
        ControllerOp::ControlledShutdown {
            broker_id: 2,
            broker_epoch: c.epoch(2)
        }
        .answer(&c.image, &c.image),
        ControllerAnswer::ControlledShutdown {
            should_shut_down: false
        }
    );
}

#[test]
fn snapshots_keep_the_lifecycle_state() {
    let mut c = Cluster::with_brokers(&[1, 2, 3]);
    let epoch = c.epoch(2);
    c.run(&ControllerOp::ControlledShutdown {
        broker_id: 2,
        broker_epoch: epoch,
    })
    .unwrap();
    c.run(&ControllerOp::FenceBroker { broker_id: 1 }).unwrap();
    // The broker holding the highest epoch leaves: the counter must survive it.
    c.run(&ControllerOp::UnregisterBroker { broker_id: 3 })
        .unwrap();
    assert!(!c.image.brokers.contains_key(&3));
    let mut rebuilt = MetadataImage::new(c.image.cluster_id.clone());
    for r in c.image.to_records() {
        rebuilt.apply(&r).unwrap();
    }
    assert_eq!(rebuilt, c.image);
    assert!(rebuilt.brokers[&2].in_controlled_shutdown);
    let next = c.image.next_broker_epoch;
    let fresh = c.register(3, 77).unwrap();
    assert_eq!(fresh, next, "no epoch is handed out twice");
}

#[test]
fn registrations_written_before_controlled_shutdown_existed_still_decode() {
    let json = r#"{"type":"RegisterBroker","broker_id":1,
        "incarnation_id":"00000000-0000-0000-0000-000000000001","broker_epoch":4,
        "end_points":[],"rack":null,"fenced":false}"#;
    let record: MetadataRecord = serde_json::from_str(json).unwrap();
    let mut image = MetadataImage::new("c".into());
    image.apply(&record).unwrap();
    assert!(!image.brokers[&1].in_controlled_shutdown);
    assert_eq!(image.next_broker_epoch, 5);
    let change = r#"{"type":"BrokerRegistrationChange","broker_id":1,"broker_epoch":4}"#;
    let change: MetadataRecord = serde_json::from_str(change).unwrap();
    image.apply(&change).unwrap();
    assert!(!image.brokers[&1].fenced);
}

/// One step of the model test; epochs are resolved against the image when it runs.
#[derive(Clone, Debug)]
enum Step {
    Register {
        broker_id: i32,
        incarnation: u128,
    },
    Unfence {
        broker_id: i32,
        stale: bool,
    },
    Fence {
        broker_id: i32,
    },
    ControlledShutdown {
        broker_id: i32,
        stale: bool,
    },
    Unregister {
        broker_id: i32,
    },
    CreateTopic {
        name: &'static str,
        partitions: i32,
        replication_factor: i16,
        unclean: bool,
    },
    CreatePartitions {
        name: &'static str,
        total: i32,
    },
    DeleteTopic {
        name: &'static str,
    },
    /// The partition's leader (broker 1 when leaderless) asks for its leader plus the
    /// replicas picked by the bits of `members`; `stale`: at the partition epoch before.
    AlterPartition {
        name: &'static str,
        partition: i32,
        members: u8,
        stale: bool,
    },
    /// ElectLeaders of partition `partition` of `name` (or of every partition, with `all`).
    ElectLeaders {
        unclean: bool,
        all: bool,
        name: &'static str,
        partition: i32,
    },
    /// AlterPartitionReassignments of partition `partition` of `name` to the brokers picked
    /// by the bits of `target` (bit i: broker i + 1; rotated by `rotate`, so the preferred
    /// replica varies), or a cancellation with `cancel`.
    Reassign {
        name: &'static str,
        partition: i32,
        target: u8,
        rotate: usize,
        cancel: bool,
    },
}

const TOPICS: &[&str] = &["a", "b", "c"];

fn step_strategy() -> impl Strategy<Value = Step> {
    let broker = 1..=4i32;
    let topic = proptest::sample::select(TOPICS);
    prop_oneof![
        3 => (broker.clone(), 0..3u128).prop_map(|(broker_id, incarnation)| Step::Register {
            broker_id,
            incarnation,
        }),
        4 => (broker.clone(), proptest::bool::weighted(0.1))
            .prop_map(|(broker_id, stale)| Step::Unfence { broker_id, stale }),
        1 => broker.clone().prop_map(|broker_id| Step::Fence { broker_id }),
        1 => (broker.clone(), proptest::bool::weighted(0.1))
            .prop_map(|(broker_id, stale)| Step::ControlledShutdown { broker_id, stale }),
        1 => broker.prop_map(|broker_id| Step::Unregister { broker_id }),
        4 => (topic.clone(), 1..5i32, proptest::sample::select(&[-1i16, 0, 1, 1, 2, 2, 3, 4][..]), any::<bool>()).prop_map(
            |(name, partitions, replication_factor, unclean)| Step::CreateTopic {
                name,
                partitions,
                replication_factor,
                unclean,
            }
        ),
        2 => (topic.clone(), 1..7i32).prop_map(|(name, total)| Step::CreatePartitions { name, total }),
        1 => topic.clone().prop_map(|name| Step::DeleteTopic { name }),
        4 => (topic.clone(), 0..4i32, any::<u8>(), proptest::bool::weighted(0.1)).prop_map(
            |(name, partition, members, stale)| Step::AlterPartition {
                name,
                partition,
                members,
                stale,
            }
        ),
        2 => (any::<bool>(), proptest::bool::weighted(0.2), topic.clone(), 0..4i32).prop_map(
            |(unclean, all, name, partition)| Step::ElectLeaders { unclean, all, name, partition }
        ),
        3 => (topic, 0..4i32, 0..32u8, 0..4usize, proptest::bool::weighted(0.2)).prop_map(
            |(name, partition, target, rotate, cancel)| Step::Reassign {
                name,
                partition,
                target,
                rotate,
                cancel,
            }
        ),
    ]
}

impl Step {
    fn op(&self, image: &MetadataImage) -> ControllerOp {
        // A registered broker's epoch, one below it when `stale`; 0 for an unknown broker.
        let epoch = |broker_id: i32, stale: bool| {
            image
                .brokers
                .get(&broker_id)
                .map_or(0, |b| b.broker_epoch - i64::from(stale))
        };
        match *self {
            Step::Register {
                broker_id,
                incarnation,
            } => ControllerOp::RegisterBroker {
                broker_id,
                incarnation_id: Uuid::from_u128(incarnation + 1),
                end_points: Vec::new(),
                rack: None,
            },
            Step::Unfence { broker_id, stale } => ControllerOp::UnfenceBroker {
                broker_id,
                broker_epoch: epoch(broker_id, stale),
            },
            Step::Fence { broker_id } => ControllerOp::FenceBroker { broker_id },
            Step::ControlledShutdown { broker_id, stale } => ControllerOp::ControlledShutdown {
                broker_id,
                broker_epoch: epoch(broker_id, stale),
            },
            Step::Unregister { broker_id } => ControllerOp::UnregisterBroker { broker_id },
            Step::CreateTopic {
                name,
                partitions,
                replication_factor,
                unclean: enabled,
            } => ControllerOp::CreateTopic {
                assignment: None,
                name: name.into(),
                partitions,
                replication_factor,
                overrides: unclean(enabled),
                internal: false,
                validate_only: false,
            },
            Step::CreatePartitions { name, total } => ControllerOp::CreatePartitions {
                assignment: None,
                name: name.into(),
                total,
                validate_only: false,
            },
            Step::DeleteTopic { name } => ControllerOp::DeleteTopic { name: name.into() },
            Step::AlterPartition {
                name,
                partition,
                members,
                stale,
            } => {
                let current = image
                    .topics
                    .get(name)
                    .and_then(|t| t.partitions.get(usize::try_from(partition).ok()?));
                let (leader, leader_epoch, partition_epoch, replicas) =
                    current.map_or((1, 0, 0, Vec::new()), |p| {
                        let leader = if p.leader == -1 { 1 } else { p.leader };
                        (
                            leader,
                            p.leader_epoch,
                            p.partition_epoch,
                            p.replicas.clone(),
                        )
                    });
                let mut new_isr = vec![leader];
                for (i, r) in replicas.iter().enumerate() {
                    if members & (1 << i) != 0 && *r != leader {
                        new_isr.push(*r);
                    }
                }
                ControllerOp::AlterPartition {
                    broker_id: leader,
                    broker_epoch: epoch(leader, false),
                    topic: name.into(),
                    partition,
                    leader_epoch,
                    partition_epoch: partition_epoch - i32::from(stale),
                    new_isr,
                }
            }
            Step::Reassign {
                name,
                partition,
                target,
                rotate,
                cancel,
            } => {
                // Bit 4 names broker 5, never registered: refused.
                let mut brokers: Vec<i32> =
                    (1..=5).filter(|b| target & (1 << (b - 1)) != 0).collect();
                if !brokers.is_empty() {
                    let by = rotate % brokers.len();
                    brokers.rotate_left(by);
                }
                ControllerOp::AlterPartitionReassignments {
                    topics: vec![(name.into(), vec![(partition, (!cancel).then_some(brokers))])],
                    allow_replication_factor_change: true,
                }
            }
            Step::ElectLeaders {
                unclean,
                all,
                name,
                partition,
            } => ControllerOp::ElectLeaders {
                election_type: if unclean {
                    ElectionType::Unclean
                } else {
                    ElectionType::Preferred
                },
                partitions: (!all).then(|| vec![(name.to_string(), vec![partition])]),
            },
        }
    }
}

/// ElectLeaders' answer against what it did: a partition answered `Ok` got a new leader (for
/// a preferred election the preferred replica, unless the partition had no leader; for an
/// unclean one, a partition that had none); every other partition kept its leader, ISR and
/// epochs.
fn check_elections(
    election_type: ElectionType,
    before: &MetadataImage,
    after: &MetadataImage,
    answer: &ControllerAnswer,
) -> Result<(), TestCaseError> {
    let ControllerAnswer::ElectLeaders { results } = answer else {
        return Err(TestCaseError::fail(format!(
            "ElectLeaders answered {answer:?}"
        )));
    };
    let mut elected = BTreeSet::new();
    for t in results {
        for (p, result) in &t.partitions {
            if result.is_ok() {
                elected.insert((t.topic.clone(), *p));
            }
        }
    }
    for (name, topic) in &before.topics {
        for (p, old) in topic.partitions.iter().enumerate() {
            let new = &after.topics[name].partitions[p];
            let id = i32::try_from(p).unwrap();
            if elected.contains(&(name.clone(), id)) {
                prop_assert!(
                    new.leader != old.leader && new.leader != -1,
                    "invariant 'an election answered NONE changed the leader' broken at {}-{}",
                    name,
                    p
                );
                let expected = match election_type {
                    ElectionType::Preferred => {
                        old.leader == -1 || new.replicas.first() == Some(&new.leader)
                    }
                    ElectionType::Unclean => old.leader == -1,
                };
                prop_assert!(
                    expected,
                    "invariant 'the election elects whom its type allows' broken at {}-{}: {:?} -> {:?}",
                    name,
                    p,
                    old,
                    new
                );
            } else {
                prop_assert_eq!(
                    new,
                    old,
                    "invariant 'a partition not elected is unchanged' broken at {}-{}",
                    name,
                    p
                );
            }
        }
    }
    Ok(())
}

/// The invariants of one image, each failure naming the one it breaks.
fn check_image(image: &MetadataImage) -> Result<(), TestCaseError> {
    let active = |b: i32| image.brokers.get(&b).is_some_and(|r| r.is_active());
    for (name, topic) in &image.topics {
        for (p, partition) in topic.partitions.iter().enumerate() {
            let at = format!("{name}-{p}: {partition:?}");
            prop_assert!(
                !partition.isr.is_empty(),
                "invariant 'the ISR is never empty' broken at {}",
                at
            );
            prop_assert!(
                partition.isr.iter().all(|r| partition.replicas.contains(r)),
                "invariant 'ISR ⊆ replicas' broken at {}",
                at
            );
            if partition.leader != -1 {
                prop_assert!(
                    partition.isr.contains(&partition.leader),
                    "invariant 'the leader is in the ISR' broken at {}",
                    at
                );
                prop_assert!(
                    active(partition.leader),
                    "invariant 'the leader is registered, unfenced and not shutting down' broken at {}",
                    at
                );
            }
            check_reassignment_lists(partition, &at)?;
            if partition.isr.len() > 1 {
                prop_assert!(
                    partition.isr.iter().all(|r| active(*r)),
                    "invariant 'a fenced (or shutting down, or unregistered) broker is in no ISR unless it is the sole member' broken at {}",
                    at
                );
            }
        }
    }
    for (broker_id, b) in &image.brokers {
        if b.fenced {
            prop_assert_eq!(
                leaderships(image, *broker_id),
                0,
                "invariant 'a fenced broker leads nothing' broken for broker {}",
                broker_id
            );
        }
        prop_assert!(
            b.broker_epoch < image.next_broker_epoch,
            "invariant 'next_broker_epoch is above every broker epoch' broken for broker {}",
            broker_id
        );
    }
    let mut rebuilt = MetadataImage::new(image.cluster_id.clone());
    for r in image.to_records() {
        rebuilt
            .apply(&r)
            .map_err(|e| TestCaseError::fail(format!("invariant 'snapshot records apply': {e}")))?;
    }
    prop_assert_eq!(
        &rebuilt,
        image,
        "invariant 'to_records rebuilds an equal image' broken"
    );
    Ok(())
}

/// A reassignment's lists (KIP-455): disjoint subsets of the replicas, the replicas the target
/// followed by the removed ones.
fn check_reassignment_lists(p: &PartitionImage, at: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        p.adding_replicas.iter().all(|r| p.replicas.contains(r))
            && p.removing_replicas.iter().all(|r| p.replicas.contains(r)),
        "invariant 'adding and removing replicas are replicas' broken at {}",
        at
    );
    prop_assert!(
        p.adding_replicas
            .iter()
            .all(|r| !p.removing_replicas.contains(r)),
        "invariant 'no replica is both added and removed' broken at {}",
        at
    );
    let distinct: BTreeSet<i32> = p.replicas.iter().copied().collect();
    prop_assert_eq!(
        distinct.len(),
        p.replicas.len(),
        "invariant 'replicas are distinct' broken at {}",
        at
    );
    let target = p.target_replicas();
    prop_assert_eq!(
        &p.replicas[target.len()..],
        &p.removing_replicas[..],
        "invariant 'replicas are the target followed by the removed ones' broken at {}",
        at
    );
    Ok(())
}

/// An AlterPartition that completed a reassignment: the replicas are the target, all in the
/// ISR (the asked ISR without the removed replicas), and a replica left or the leader moved
/// with a new leader epoch.
fn check_completed(
    old: &PartitionImage,
    new: &PartitionImage,
    asked: &[i32],
) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        &new.replicas,
        &old.target_replicas(),
        "invariant 'a completed reassignment leaves the target' broken"
    );
    let isr: Vec<i32> = asked
        .iter()
        .copied()
        .filter(|r| !old.removing_replicas.contains(r))
        .collect();
    prop_assert_eq!(
        &new.isr,
        &isr,
        "invariant 'the ISR loses only the removed replicas' broken"
    );
    prop_assert!(
        new.replicas.iter().all(|r| new.isr.contains(r)),
        "invariant 'a reassignment completes only with the whole target in sync' broken"
    );
    if !old.removing_replicas.is_empty() || new.leader != old.leader {
        prop_assert!(
            new.leader_epoch > old.leader_epoch,
            "invariant 'removed replicas are fenced by a new leader epoch' broken"
        );
    }
    Ok(())
}

/// AlterPartitionReassignments of one partition: refused as Kafka refuses (unknown partition,
/// no reassignment to cancel, an invalid target), else the partition moves towards the target
/// (or back to its original replicas), completing at once when the ISR holds the target.
fn check_reassignment(
    before: &MetadataImage,
    after: &MetadataImage,
    (topic, partitions): &TopicReassignments,
    answer: &ControllerAnswer,
) -> Result<(), TestCaseError> {
    let ControllerAnswer::AlterPartitionReassignments { results } = answer else {
        return Err(TestCaseError::fail(format!("answered {answer:?}")));
    };
    let (partition, target) = &partitions[0];
    let result = &results[0].partitions[0];
    prop_assert_eq!(result.0, *partition);
    let old = before
        .topics
        .get(topic)
        .and_then(|t| t.partitions.get(usize::try_from(*partition).ok()?));
    let Some(old) = old else {
        prop_assert!(
            matches!(
                result.1,
                Err(ReassignmentError::UnknownTopic { .. }
                    | ReassignmentError::UnknownPartition { .. })
            ),
            "invariant 'an unknown partition is UNKNOWN_TOPIC_OR_PARTITION' broken: {:?}",
            result
        );
        return Ok(());
    };
    let new = &after.topics[topic].partitions[usize::try_from(*partition).unwrap()];
    match (target, &result.1) {
        (None, Err(ReassignmentError::NoReassignmentInProgress)) => {
            prop_assert!(!old.is_reassigning());
        }
        (None, Err(ReassignmentError::InvalidReplicaAssignment { .. })) => {
            prop_assert!(old.isr.iter().all(|r| old.adding_replicas.contains(r)));
        }
        (None, Ok(())) => {
            prop_assert!(
                !new.is_reassigning(),
                "invariant 'a cancellation ends it' broken"
            );
            prop_assert_eq!(
                &new.replicas,
                &old.original_replicas(),
                "invariant 'a cancellation goes back to the original replicas' broken"
            );
        }
        (Some(target), Err(ReassignmentError::InvalidReplicaAssignment { .. })) => {
            prop_assert!(
                target.is_empty() || target.iter().any(|b| !before.brokers.contains_key(b)),
                "invariant 'only an empty target or an unknown broker is refused' broken: {:?}",
                target
            );
            prop_assert_eq!(old, new);
        }
        (Some(target), Ok(())) => {
            if new.is_reassigning() {
                prop_assert_eq!(
                    &new.target_replicas(),
                    target,
                    "invariant 'replicas start with the target' broken"
                );
                prop_assert!(
                    !target.iter().all(|r| old.isr.contains(r)),
                    "invariant 'a target already in sync completes at once' broken"
                );
            } else {
                prop_assert_eq!(
                    &new.replicas,
                    target,
                    "invariant 'a completed reassignment leaves the target' broken"
                );
            }
        }
        (target, result) => {
            return Err(TestCaseError::fail(format!(
                "unexpected result {result:?} for target {target:?} of {old:?}"
            )));
        }
    }
    Ok(())
}

/// Leader epochs (by topic id and partition) never go back, and move on every leader change.
fn check_epochs(before: &MetadataImage, after: &MetadataImage) -> Result<(), TestCaseError> {
    for topic in after.topics.values() {
        let Some((_, old)) = before.topic_by_id(topic.id) else {
            continue;
        };
        for (p, (old, new)) in old.partitions.iter().zip(&topic.partitions).enumerate() {
            prop_assert!(
                new.leader_epoch >= old.leader_epoch,
                "invariant 'leader epochs never decrease' broken at {}-{}",
                topic.id,
                p
            );
            if new.leader != old.leader {
                prop_assert!(
                    new.leader_epoch > old.leader_epoch,
                    "invariant 'the leader epoch increases on every leader change' broken at {}-{}",
                    topic.id,
                    p
                );
            }
        }
    }
    for (broker_id, b) in &after.brokers {
        if let Some(old) = before.brokers.get(broker_id) {
            prop_assert!(
                b.broker_epoch >= old.broker_epoch,
                "invariant 'broker epochs never decrease' broken for broker {}",
                broker_id
            );
        }
    }
    prop_assert!(
        after.next_broker_epoch >= before.next_broker_epoch,
        "invariant 'next_broker_epoch never decreases' broken"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random lifecycle and topic steps, with random live sessions, keep every invariant.
    #[test]
    fn lifecycle_keeps_the_partition_invariants(
        steps in proptest::collection::vec(
            (step_strategy(), proptest::collection::btree_set(1..=4i32, 0..=2), any::<u64>()),
            1..60,
        ),
    ) {
        // Two active brokers to start from; the steps register, fence and remove up to four.
        let mut c = Cluster::with_brokers(&[1, 2]);
        for (step, live, seed) in &steps {
            c.live.clone_from(live);
            c.placement_seed = *seed;
            let before = c.image.clone();
            let op = step.op(&c.image);
            match c.run(&op) {
                Ok(records) => {
                    if let ControllerOp::ControlledShutdown { broker_id, .. } = op {
                        prop_assert_eq!(
                            op.answer(&c.before, &c.image),
                            ControllerAnswer::ControlledShutdown { should_shut_down: true },
                            "invariant 'after a controlled shutdown the broker leads nothing' broken for {}",
                            broker_id
                        );
                    }
                    if let ControllerOp::AlterPartition { topic, partition, new_isr, .. } = &op {
                        let p = usize::try_from(*partition).unwrap();
                        let (old, new) = (
                            &before.topics[topic].partitions[p],
                            &c.image.topics[topic].partitions[p],
                        );
                        let bump = i32::from(!records.is_empty());
                        if old.is_reassigning() && !new.is_reassigning() {
                            check_completed(old, new, new_isr)?;
                        } else {
                            prop_assert_eq!(
                                (new.leader, new.leader_epoch, new.partition_epoch, &new.isr),
                                (old.leader, old.leader_epoch, old.partition_epoch + bump, new_isr),
                                "invariant 'AlterPartition replaces the ISR, bumps only the partition epoch' broken"
                            );
                        }
                    }
                    if let ControllerOp::AlterPartitionReassignments { topics, .. } = &op {
                        check_reassignment(&before, &c.image, &topics[0], &op.answer(&before, &c.image))?;
                    }
                    if let ControllerOp::ElectLeaders { election_type, .. } = &op {
                        let answer = op.answer(&before, &c.image);
                        check_elections(*election_type, &before, &c.image, &answer)?;
                    }
                    if let ControllerOp::RegisterBroker { broker_id, .. } = op {
                        let registered = &c.image.brokers[&broker_id];
                        if !records.is_empty() {
                            prop_assert!(
                                registered.fenced,
                                "invariant 'a new registration starts fenced' broken"
                            );
                            prop_assert!(
                                before.brokers.values().all(|b| b.broker_epoch < registered.broker_epoch),
                                "invariant 'a new broker epoch is above every earlier one' broken"
                            );
                        }
                    }
                }
                Err(e) => {
                    prop_assert!(
                        !matches!(e, ControllerError::Apply(_)),
                        "invariant 'the proposer refuses only with a typed refusal' broken: {}",
                        e
                    );
                    prop_assert_eq!(&c.image, &before, "a refused op changed the image");
                }
            }
            check_image(&c.image)?;
            check_epochs(&before, &c.image)?;
        }
        let mut replayed = MetadataImage::new(c.image.cluster_id.clone());
        for r in c.changes.iter().flatten() {
            replayed.apply(r).map_err(|e| TestCaseError::fail(format!("replay: {e}")))?;
        }
        prop_assert_eq!(&replayed, &c.image, "invariant 'the log replays to the image' broken");
    }
}

// ---- AlterPartition (KRaft `ReplicationControlManager::alterPartition`) ---------------------

/// Brokers 1, 2, 3 and topic "t" with one partition on [1, 2, 3], led by 1.
fn alter_cluster() -> Cluster {
    let mut c = Cluster::with_brokers(&[1, 2, 3]);
    c.create("t", 1, 3, BTreeMap::new()).unwrap();
    assert_eq!(c.partition("t", 0).replicas, vec![1, 2, 3]);
    c
}

/// AlterPartition of "t"-0 from broker 1 at its current epochs, to `new_isr`.
fn alter(c: &Cluster, new_isr: &[i32]) -> ControllerOp {
    let p = c.partition("t", 0);
    ControllerOp::AlterPartition {
        broker_id: 1,
        broker_epoch: c.epoch(1),
        topic: "t".into(),
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: new_isr.to_vec(),
    }
}

/// `op` with its fields changed by `f`.
fn with(
    mut op: ControllerOp,
    f: impl FnOnce(&mut i32, &mut i64, &mut i32, &mut i32, &mut i32),
) -> ControllerOp {
    if let ControllerOp::AlterPartition {
        broker_id,
        broker_epoch,
        partition,
        leader_epoch,
        partition_epoch,
        ..
    } = &mut op
    {
        f(
            broker_id,
            broker_epoch,
            partition,
            leader_epoch,
            partition_epoch,
        );
    }
    op
}

#[test]
fn alter_partition_replaces_the_isr_and_bumps_only_the_partition_epoch() {
    let mut c = alter_cluster();
    let before = c.partition("t", 0).clone();
    let op = alter(&c, &[1, 3]);
    let records = c.run(&op).unwrap();
    assert_eq!(records.len(), 1);
    let p = c.partition("t", 0);
    assert_eq!(p.isr, vec![1, 3]);
    assert_eq!(p.partition_epoch, before.partition_epoch + 1);
    assert_eq!((p.leader, p.leader_epoch), (1, before.leader_epoch));
    assert_eq!(
        op.answer(&c.before, &c.image),
        ControllerAnswer::AlterPartition {
            leader: 1,
            leader_epoch: before.leader_epoch,
            partition_epoch: before.partition_epoch + 1,
        }
    );
    // Expanding again works from the new partition epoch.
    c.run(&alter(&c, &[1, 3, 2])).unwrap();
    assert_eq!(c.partition("t", 0).isr, vec![1, 3, 2]);
    assert!(!op.validate_only());
}

#[test]
fn alter_partition_to_the_current_isr_changes_nothing() {
    let mut c = alter_cluster();
    let isr = c.partition("t", 0).isr.clone();
    assert!(c.run(&alter(&c, &isr)).unwrap().is_empty());
    assert_eq!(c.partition("t", 0).partition_epoch, 0);
}

#[test]
fn alter_partition_refusals() {
    let mut c = alter_cluster();
    let ok = alter(&c, &[1, 2]);
    let stale = with(ok.clone(), |_, e, _, _, _| *e -= 1);
    assert!(matches!(
        c.run(&stale),
        Err(ControllerError::StaleBrokerEpoch { .. })
    ));
    let unregistered = with(ok.clone(), |b, _, _, _, _| *b = 9);
    assert!(matches!(
        c.run(&unregistered),
        Err(ControllerError::StaleBrokerEpoch { current: -1, .. })
    ));
    let mut unknown_topic = ok.clone();
    if let ControllerOp::AlterPartition { topic, .. } = &mut unknown_topic {
        *topic = "nope".into();
    }
    assert!(matches!(
        c.run(&unknown_topic),
        Err(ControllerError::UnknownTopic { .. })
    ));
    for p in [1, -1] {
        let op = with(ok.clone(), |_, _, part, _, _| *part = p);
        assert!(
            matches!(c.run(&op), Err(ControllerError::UnknownPartition { .. })),
            "{p}"
        );
    }
    let ahead = with(ok.clone(), |_, _, _, l, _| *l += 1);
    assert!(matches!(
        c.run(&ahead),
        Err(ControllerError::AlterPartitionEpochAhead { .. })
    ));
    let ahead = with(ok.clone(), |_, _, _, _, pe| *pe += 1);
    assert!(matches!(
        c.run(&ahead),
        Err(ControllerError::AlterPartitionEpochAhead { .. })
    ));
    let e2 = c.epoch(2);
    let not_leader = with(ok.clone(), |b, e, _, _, _| (*b, *e) = (2, e2));
    assert!(matches!(
        c.run(&not_leader),
        Err(ControllerError::NotPartitionLeader { leader: 1, .. })
    ));
    for bad in [&[1, 1][..], &[1, 4], &[2, 3], &[]] {
        assert!(
            matches!(
                c.run(&alter(&c, bad)),
                Err(ControllerError::InvalidIsr { .. })
            ),
            "{bad:?}"
        );
    }
    // Refusals change nothing.
    assert_eq!(c.partition("t", 0).partition_epoch, 0);
    assert_eq!(c.partition("t", 0).isr, vec![1, 2, 3]);
    // An ISR change moves the partition epoch: the old one is refused.
    c.run(&alter(&c, &[1, 2])).unwrap();
    assert!(matches!(
        c.run(&ok.clone()),
        Err(ControllerError::InvalidUpdateVersion { current: 1, .. })
    ));
    // A leader change moves the leader epoch: the old one is fenced.
    c.run(&ControllerOp::FenceBroker { broker_id: 1 }).unwrap();
    let p = c.partition("t", 0).clone();
    assert_eq!(p.leader, 2);
    let old_epoch = with(alter(&c, &[2]), |b, e, _, l, _| {
        (*b, *e, *l) = (2, e2, p.leader_epoch - 1)
    });
    assert!(matches!(
        c.run(&old_epoch),
        Err(ControllerError::FencedLeaderEpoch { .. })
    ));
}

#[test]
fn alter_partition_checks_run_in_kafkas_order() {
    let mut c = alter_cluster();
    let e2 = c.epoch(2);
    let e3 = c.epoch(3);
    // Stale broker epoch before an unknown partition.
    let op = with(alter(&c, &[1]), |_, e, part, _, _| {
        (*e, *part) = (*e - 1, 5)
    });
    assert!(matches!(
        c.run(&op),
        Err(ControllerError::StaleBrokerEpoch { .. })
    ));
    // An older leader epoch from a non-leader is FENCED_LEADER_EPOCH first.
    c.run(&ControllerOp::FenceBroker { broker_id: 1 }).unwrap();
    let p = c.partition("t", 0).clone();
    let op = with(alter(&c, &[2]), |b, e, _, l, _| {
        (*b, *e, *l) = (3, e3, p.leader_epoch - 1)
    });
    assert!(matches!(
        c.run(&op),
        Err(ControllerError::FencedLeaderEpoch { .. })
    ));
    // Not the leader before an older partition epoch.
    let op = with(alter(&c, &[2]), |b, e, _, _, pe| {
        (*b, *e, *pe) = (3, e3, *pe - 1)
    });
    assert!(matches!(
        c.run(&op),
        Err(ControllerError::NotPartitionLeader { .. })
    ));
    // An older partition epoch before an invalid ISR.
    let op = with(alter(&c, &[9]), |b, e, _, _, pe| {
        (*b, *e, *pe) = (2, e2, *pe - 1)
    });
    assert!(matches!(
        c.run(&op),
        Err(ControllerError::InvalidUpdateVersion { .. })
    ));
    // An invalid ISR before an ineligible member (1 is fenced).
    let op = with(alter(&c, &[1, 9]), |b, e, _, _, _| (*b, *e) = (2, e2));
    assert!(matches!(
        c.run(&op),
        Err(ControllerError::InvalidIsr { .. })
    ));
}

#[test]
fn alter_partition_refuses_fenced_shutting_down_or_unregistered_members() {
    let mut c = alter_cluster();
    c.run(&alter(&c, &[1])).unwrap();
    c.run(&ControllerOp::FenceBroker { broker_id: 2 }).unwrap();
    let e3 = c.epoch(3);
    c.run(&ControllerOp::ControlledShutdown {
        broker_id: 3,
        broker_epoch: e3,
    })
    .unwrap();
    for (isr, member, reason) in [(&[1, 2][..], 2, "fenced"), (&[1, 3], 3, "shutting down")] {
        match c.run(&alter(&c, isr)) {
            Err(ControllerError::IneligibleReplica {
                broker_id,
                reason: r,
                ..
            }) => assert_eq!((broker_id, r.as_str()), (member, reason)),
            other => panic!("{isr:?}: {other:?}"),
        }
    }
    c.run(&ControllerOp::UnregisterBroker { broker_id: 2 })
        .unwrap();
    assert!(matches!(
        c.run(&alter(&c, &[1, 2])),
        Err(ControllerError::IneligibleReplica { broker_id: 2, .. })
    ));
    // The leader alone is still fine (a no-op here).
    assert!(c.run(&alter(&c, &[1])).unwrap().is_empty());
}

// ---- ElectLeaders (KRaft `ReplicationControlManager::electLeaders`) -------------------------

/// Runs ElectLeaders of `election_type` for `partitions` (`None`: all); returns its records
/// and its results.
fn elect(
    c: &mut Cluster,
    election_type: ElectionType,
    partitions: Option<&[(&str, &[i32])]>,
) -> (Vec<MetadataRecord>, Vec<TopicElectionResults>) {
    let op = ControllerOp::ElectLeaders {
        election_type,
        partitions: partitions.map(|named| {
            named
                .iter()
                .map(|(t, ps)| (t.to_string(), ps.to_vec()))
                .collect()
        }),
    };
    let records = c.run(&op).expect("ElectLeaders is never refused whole");
    match op.answer(&c.before, &c.image) {
        ControllerAnswer::ElectLeaders { results } => (records, results),
        other => panic!("ElectLeaders answered {other:?}"),
    }
}

/// The results of one topic's partitions.
fn results_of(results: &[TopicElectionResults]) -> Vec<(&str, i32, Result<(), ElectionError>)> {
    results
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|(p, r)| (t.topic.as_str(), *p, r.clone()))
        })
        .collect()
}

#[test]
fn preferred_election_moves_the_leadership_back_once_the_preferred_replica_is_in_sync() {
    let mut c = alter_cluster();
    c.run(&ControllerOp::FenceBroker { broker_id: 1 }).unwrap();
    c.unfence(1).unwrap();
    let moved = c.partition("t", 0).clone();
    assert_eq!((moved.leader, moved.isr.clone()), (2, vec![2, 3]));
    // Not in the ISR yet: nothing changes.
    let (records, results) = elect(&mut c, ElectionType::Preferred, Some(&[("t", &[0])]));
    assert!(records.is_empty());
    assert_eq!(
        results_of(&results),
        [("t", 0, Err(ElectionError::PreferredLeaderNotAvailable))]
    );
    // Broker 1 caught up: the leader (2) adds it to the ISR.
    c.run(&ControllerOp::AlterPartition {
        broker_id: 2,
        broker_epoch: c.epoch(2),
        topic: "t".into(),
        partition: 0,
        leader_epoch: moved.leader_epoch,
        partition_epoch: moved.partition_epoch,
        new_isr: vec![2, 3, 1],
    })
    .unwrap();
    let before = c.partition("t", 0).clone();
    let (records, results) = elect(&mut c, ElectionType::Preferred, Some(&[("t", &[0])]));
    assert_eq!(records.len(), 1);
    assert_eq!(results_of(&results), [("t", 0, Ok(()))]);
    let after = c.partition("t", 0);
    assert_eq!(after.leader, 1);
    assert_eq!(after.leader_epoch, before.leader_epoch + 1);
    assert_eq!(after.partition_epoch, before.partition_epoch + 1);
    assert_eq!(after.isr, before.isr, "a preferred election keeps the ISR");
    // Again: the preferred replica leads already.
    let (records, results) = elect(&mut c, ElectionType::Preferred, Some(&[("t", &[0])]));
    assert!(records.is_empty());
    assert_eq!(
        results_of(&results),
        [("t", 0, Err(ElectionError::ElectionNotNeeded))]
    );
}

#[test]
fn preferred_election_refuses_a_fenced_or_shutting_down_preferred_replica() {
    let mut c = alter_cluster();
    // Broker 1 shuts down: 2 leads, 1 stays a replica outside the ISR.
    let e1 = c.epoch(1);
    c.run(&ControllerOp::ControlledShutdown {
        broker_id: 1,
        broker_epoch: e1,
    })
    .unwrap();
    assert_eq!(c.partition("t", 0).leader, 2);
    let (records, results) = elect(&mut c, ElectionType::Preferred, Some(&[("t", &[0])]));
    assert!(records.is_empty());
    assert_eq!(
        results_of(&results),
        [("t", 0, Err(ElectionError::PreferredLeaderNotAvailable))]
    );
}

#[test]
fn elections_of_unknown_topics_and_partitions_answer_unknown_topic_or_partition() {
    let mut c = alter_cluster();
    for election_type in [ElectionType::Preferred, ElectionType::Unclean] {
        let (records, results) = elect(
            &mut c,
            election_type,
            Some(&[("nope", &[0]), ("t", &[1, -1, 0])]),
        );
        assert!(records.is_empty());
        let unknown = |partition| ElectionError::UnknownPartition {
            topic: "t".into(),
            partition,
        };
        assert_eq!(
            results_of(&results),
            [
                (
                    "nope",
                    0,
                    Err(ElectionError::UnknownTopic {
                        topic: "nope".into()
                    })
                ),
                ("t", 1, Err(unknown(1))),
                ("t", -1, Err(unknown(-1))),
                ("t", 0, Err(ElectionError::ElectionNotNeeded)),
            ]
        );
    }
    assert_eq!(
        ElectionError::UnknownPartition {
            topic: "t".into(),
            partition: 1
        }
        .to_string(),
        "No such partition as t-1"
    );
}

#[test]
fn an_election_of_every_partition_lists_every_topic_but_only_the_partitions_it_concerned() {
    let mut c = Cluster::with_brokers(&[1, 2, 3]);
    c.create("a", 3, 3, BTreeMap::new()).unwrap();
    c.create("b", 1, 3, BTreeMap::new()).unwrap();
    let preferred = |c: &Cluster, t: &str, p| c.partition(t, p).replicas[0];
    let broker = preferred(&c, "a", 0);
    c.run(&ControllerOp::FenceBroker { broker_id: broker })
        .unwrap();
    c.unfence(broker).unwrap();
    // `broker` is out of every ISR: its preferred partitions answer "not available", the
    // others are left out; "b" is listed even when none of its partitions is.
    let (records, results) = elect(&mut c, ElectionType::Preferred, None);
    assert!(records.is_empty());
    let mut expected = Vec::new();
    for (t, n) in [("a", 3), ("b", 1)] {
        for p in 0..n {
            if preferred(&c, t, p) == broker {
                let p = i32::try_from(p).unwrap();
                expected.push((t, p, Err(ElectionError::PreferredLeaderNotAvailable)));
            }
        }
    }
    assert_eq!(results_of(&results), expected);
    assert_eq!(
        results.iter().map(|t| t.topic.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    // A partition named twice gets the same answer twice and one record.
    let p = c.partition("a", 1).clone();
    let leader = p.leader;
    let mut isr = p.isr.clone();
    if !isr.contains(&broker) {
        isr.push(broker);
    }
    c.run(&ControllerOp::AlterPartition {
        broker_id: leader,
        broker_epoch: c.epoch(leader),
        topic: "a".into(),
        partition: 1,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: isr,
    })
    .unwrap();
    let twice: &[(&str, &[i32])] = &[("a", &[1]), ("a", &[1])];
    let (records, results) = elect(&mut c, ElectionType::Preferred, Some(twice));
    let elected = if preferred(&c, "a", 1) == leader {
        Err(ElectionError::ElectionNotNeeded)
    } else {
        Ok(())
    };
    assert_eq!(records.len(), usize::from(elected.is_ok()));
    assert_eq!(
        results_of(&results),
        [("a", 1, elected.clone()), ("a", 1, elected)]
    );
}

#[test]
fn unclean_election_picks_an_active_replica_outside_the_isr_for_a_leaderless_partition() {
    let mut c = alter_cluster();
    c.create("solo", 1, 1, BTreeMap::new()).unwrap();
    assert_eq!(c.partition("solo", 0).replicas, vec![1]);
    // "t"-0's ISR shrinks to its leader 1, which is then fenced: leaderless, ISR [1]; unclean
    // election is not enabled for the topic, so no leader comes by itself.
    c.run(&alter(&c, &[1])).unwrap();
    c.run(&ControllerOp::FenceBroker { broker_id: 1 }).unwrap();
    let before = c.partition("t", 0).clone();
    assert_eq!((before.leader, before.isr.clone()), (-1, vec![1]));
    let (records, results) = elect(&mut c, ElectionType::Preferred, Some(&[("t", &[0])]));
    assert!(records.is_empty());
    assert_eq!(
        results_of(&results),
        [("t", 0, Err(ElectionError::PreferredLeaderNotAvailable))]
    );
    let (records, results) = elect(
        &mut c,
        ElectionType::Unclean,
        Some(&[("t", &[0]), ("solo", &[0])]),
    );
    assert_eq!(records.len(), 1);
    assert_eq!(
        results_of(&results),
        [
            ("t", 0, Ok(())),
            ("solo", 0, Err(ElectionError::EligibleLeadersNotAvailable)),
        ]
    );
    let after = c.partition("t", 0);
    assert_eq!((after.leader, after.isr.clone()), (2, vec![2]));
    assert_eq!(after.leader_epoch, before.leader_epoch + 1);
    // It has a leader now.
    let (records, results) = elect(&mut c, ElectionType::Unclean, Some(&[("t", &[0])]));
    assert!(records.is_empty());
    assert_eq!(
        results_of(&results),
        [("t", 0, Err(ElectionError::ElectionNotNeeded))]
    );
}

fn acl(name: &str, principal: &str, operation: acl::AclOperation) -> acl::AclBinding {
    acl::AclBinding {
        resource_type: acl::RESOURCE_TOPIC,
        resource_name: name.to_string(),
        pattern_type: acl::PATTERN_LITERAL,
        principal: principal.to_string(),
        host: "*".to_string(),
        operation,
        permission_type: acl::PERMISSION_ALLOW,
    }
}

#[test]
fn acls_are_created_once_deleted_by_filter_and_survive_a_snapshot() {
    use acl::AclOperation::{Read, Write};
    let mut c = Cluster::new();
    let (a, b) = (acl("t", "User:alice", Read), acl("t", "User:bob", Write));
    let mut invalid = acl("", "User:alice", Read);
    invalid.pattern_type = acl::PATTERN_MATCH;
    let op = ControllerOp::CreateAcls {
        creations: vec![a.clone(), a.clone(), invalid, b.clone()],
    };
    assert_eq!(
        c.run(&op).unwrap().len(),
        2,
        "a duplicate and an invalid creation add nothing"
    );
    match op.answer(&c.before, &c.image) {
        ControllerAnswer::CreateAcls { results } => {
            assert_eq!(
                results.iter().map(Result::is_ok).collect::<Vec<_>>(),
                [true, true, false, true]
            );
        }
        other => panic!("CreateAcls answered {other:?}"),
    }
    // Again: present already, so no record; ids never collide with the taken ones.
    assert!(c.run(&op).unwrap().is_empty());
    c.run(&ControllerOp::CreateAcls {
        creations: vec![acl("u", "User:alice", Read)],
    })
    .unwrap();
    assert_eq!(c.image.acls.len(), 3);

    let mut rebuilt = MetadataImage::new("c".into());
    for r in c.image.to_records() {
        rebuilt.apply(&r).unwrap();
    }
    assert_eq!(rebuilt, c.image, "snapshot records rebuild the ACLs");

    let filter = acl::AclBindingFilter {
        resource_type: acl::RESOURCE_TOPIC,
        resource_name: Some("t".to_string()),
        pattern_type: acl::PATTERN_MATCH,
        principal: Some("User:alice".to_string()),
        host: None,
        operation: Some(acl::AclOperation::Any),
        permission_type: acl::PERMISSION_ANY,
    };
    let mut unknown = filter.clone();
    unknown.operation = None;
    let op = ControllerOp::DeleteAcls {
        filters: vec![filter, unknown],
    };
    assert_eq!(c.run(&op).unwrap().len(), 1);
    match op.answer(&c.before, &c.image) {
        ControllerAnswer::DeleteAcls { results } => {
            assert_eq!(results[0].as_ref().unwrap(), &vec![a]);
            assert!(results[1].is_err());
        }
        other => panic!("DeleteAcls answered {other:?}"),
    }
    let left: Vec<_> = c.image.acls.values().cloned().collect();
    assert_eq!(left, vec![b, acl("u", "User:alice", Read)]);
}

#[test]
fn client_quotas_are_set_changed_removed_and_survive_a_snapshot() {
    use quotas::{QuotaValue, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE};
    let mut c = Cluster::new();
    let alice = vec![("user".to_string(), Some("alice".to_string()))];
    let set = |v: Option<f64>| (PRODUCER_BYTE_RATE.to_string(), v.map(QuotaValue));
    let op = |entries| ControllerOp::AlterClientQuotas {
        entries,
        validate_only: false,
    };
    let bad = vec![("user".to_string(), Some(String::new()))];
    let first = op(vec![
        (alice.clone(), vec![set(Some(1024.0))]),
        (bad, vec![set(Some(1.0))]),
    ]);
    assert_eq!(c.run(&first).unwrap().len(), 1);
    match first.answer(&c.before, &c.image) {
        ControllerAnswer::AlterClientQuotas { results } => {
            assert!(results[0].is_ok() && results[1].is_err(), "{results:?}");
        }
        other => panic!("AlterClientQuotas answered {other:?}"),
    }
    assert!(
        c.run(&first).unwrap().is_empty(),
        "an unchanged value writes nothing"
    );
    // A refused change (a fractional byte rate) leaves the entity's other changes out too.
    let mixed = op(vec![(
        alice.clone(),
        vec![
            (REQUEST_PERCENTAGE.to_string(), Some(QuotaValue(50.0))),
            set(Some(10.5)),
        ],
    )]);
    assert!(c.run(&mixed).unwrap().is_empty());
    c.run(&op(vec![(
        alice.clone(),
        vec![(REQUEST_PERCENTAGE.to_string(), Some(QuotaValue(50.0)))],
    )]))
    .unwrap();
    let mut rebuilt = MetadataImage::new("c".into());
    for r in c.image.to_records() {
        rebuilt.apply(&r).unwrap();
    }
    assert_eq!(rebuilt, c.image, "snapshot records rebuild the quotas");
    c.run(&op(vec![(
        alice.clone(),
        vec![set(None), (REQUEST_PERCENTAGE.to_string(), None)],
    )]))
    .unwrap();
    assert!(
        c.image.client_quotas.is_empty(),
        "no entity is kept without a value"
    );
}

#[test]
fn scram_credentials_are_upserted_deleted_refused_and_survive_a_snapshot() {
    use super::scram::{ScramAlterError, ScramMechanism, ScramUpsertion};
    let mut c = Cluster::new();
    let up = |name: &str, mechanism: i8, iterations: i32| ScramUpsertion {
        name: name.to_string(),
        mechanism,
        iterations,
        salt: b"salt".to_vec(),
        salted_password: b"salted".to_vec(),
    };
    let op = |deletions: Vec<(&str, i8)>, upsertions| ControllerOp::AlterUserScramCredentials {
        deletions: deletions
            .into_iter()
            .map(|(n, m)| (n.to_string(), m))
            .collect(),
        upsertions,
    };
    let first = op(
        vec![("carol", 1), ("dave", 1)],
        vec![
            up("alice", 1, 8192),
            up("bob", 2, 100),
            up("dave", 2, 8192),
            up("erin", 3, 8192),
        ],
    );
    assert_eq!(c.run(&first).unwrap().len(), 1, "only alice's is written");
    match first.answer(&c.before, &c.image) {
        ControllerAnswer::AlterUserScramCredentials { results } => {
            let by_user: std::collections::BTreeMap<_, _> = results.into_iter().collect();
            assert_eq!(by_user["alice"], Ok(()));
            assert_eq!(
                by_user["bob"],
                Err(ScramAlterError::Unacceptable("Too few iterations".into()))
            );
            assert_eq!(by_user["carol"], Err(ScramAlterError::NotFound));
            assert_eq!(by_user["dave"], Err(ScramAlterError::Duplicate));
            assert_eq!(by_user["erin"], Err(ScramAlterError::UnknownMechanism));
            assert_eq!(by_user.len(), 5, "one result per user");
        }
        other => panic!("AlterUserScramCredentials answered {other:?}"),
    }
    let alice = &c.image.scram_credentials["alice"][&ScramMechanism::Sha256];
    assert_eq!(alice.iterations, 8192);
    assert_eq!(alice.salt, b"salt");
    assert_eq!(
        alice.stored_key,
        ScramMechanism::Sha256.stored_key(b"salted")
    );
    assert_eq!(
        alice.server_key,
        ScramMechanism::Sha256.server_key(b"salted")
    );
    c.run(&op(vec![], vec![up("alice", 2, 4096)])).unwrap();
    let mut rebuilt = MetadataImage::new("c".into());
    for r in c.image.to_records() {
        rebuilt.apply(&r).unwrap();
    }
    assert_eq!(rebuilt, c.image, "snapshot records rebuild the credentials");
    c.run(&op(vec![("alice", 1), ("alice", 2)], vec![]))
        .unwrap();
    assert!(
        c.image.scram_credentials.contains_key("alice"),
        "a user named twice changes nothing"
    );
    c.run(&op(vec![("alice", 1)], vec![])).unwrap();
    c.run(&op(vec![], vec![])).unwrap();
    assert_eq!(
        c.image.scram_credentials["alice"]
            .keys()
            .collect::<Vec<_>>(),
        vec![&ScramMechanism::Sha512]
    );
    c.run(&op(vec![("alice", 2)], vec![])).unwrap();
    assert!(
        c.image.scram_credentials.is_empty(),
        "no user is kept without a credential"
    );
}

// ---- AlterPartitionReassignments (KIP-455) --------------------------------------------------

/// Brokers 1, 2, 3 and topic "r" with one partition on [1, 2], led by 1.
fn reassign_cluster() -> Cluster {
    let mut c = Cluster::with_brokers(&[1, 2, 3]);
    c.run(&ControllerOp::CreateTopic {
        assignment: Some(vec![vec![1, 2]]),
        name: "r".into(),
        partitions: 1,
        replication_factor: -1,
        overrides: BTreeMap::new(),
        internal: false,
        validate_only: false,
    })
    .unwrap();
    c
}

/// Reassigns "r"-0 to `target` (`None`: cancels); the partition's result.
fn reassign(c: &mut Cluster, target: Option<Vec<i32>>) -> Result<(), ReassignmentError> {
    reassign_with(c, "r", 0, target, true)
}

fn reassign_with(
    c: &mut Cluster,
    topic: &str,
    partition: i32,
    target: Option<Vec<i32>>,
    allow_replication_factor_change: bool,
) -> Result<(), ReassignmentError> {
    let op = ControllerOp::AlterPartitionReassignments {
        topics: vec![(topic.into(), vec![(partition, target)])],
        allow_replication_factor_change,
    };
    c.run(&op).unwrap();
    match op.answer(&c.before, &c.image) {
        ControllerAnswer::AlterPartitionReassignments { results } => {
            assert_eq!(results.len(), 1);
            assert_eq!(results[0].topic, topic);
            results[0].partitions[0].1.clone()
        }
        other => panic!("answered {other:?}"),
    }
}

/// AlterPartition of "r"-0 from its leader at its current epochs.
fn alter_r(c: &mut Cluster, new_isr: &[i32]) -> ControllerAnswer {
    let p = c.partition("r", 0).clone();
    let op = ControllerOp::AlterPartition {
        broker_id: p.leader,
        broker_epoch: c.epoch(p.leader),
        topic: "r".into(),
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: new_isr.to_vec(),
    };
    c.run(&op).unwrap();
    op.answer(&c.before, &c.image)
}

#[test]
fn a_move_adds_the_new_replica_then_completes_when_it_is_in_sync() {
    let mut c = reassign_cluster();
    reassign(&mut c, Some(vec![2, 3])).unwrap();
    let p = c.partition("r", 0);
    assert_eq!(
        (
            p.replicas.clone(),
            p.adding_replicas.clone(),
            p.removing_replicas.clone()
        ),
        (vec![2, 3, 1], vec![3], vec![1])
    );
    assert_eq!(
        (p.isr.clone(), p.leader, p.leader_epoch, p.partition_epoch),
        (vec![1, 2], 1, 0, 1)
    );
    // Broker 3 catches up: the leader takes it into the ISR, which completes the move; the
    // leader (1) is being removed, so broker 2 leads at a new leader epoch.
    let answer = alter_r(&mut c, &[1, 2, 3]);
    let p = c.partition("r", 0).clone();
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader),
        (vec![2, 3], vec![2, 3], 2)
    );
    assert!(!p.is_reassigning());
    assert_eq!((p.leader_epoch, p.partition_epoch), (1, 2));
    assert_eq!(
        answer,
        ControllerAnswer::AlterPartition {
            leader: 2,
            leader_epoch: 1,
            partition_epoch: 2
        }
    );
    assert!(matches!(
        reassign(&mut c, None),
        Err(ReassignmentError::NoReassignmentInProgress)
    ));
}

#[test]
fn a_move_that_keeps_the_leader_completes_with_a_new_leader_epoch() {
    let mut c = reassign_cluster();
    reassign(&mut c, Some(vec![1, 3])).unwrap();
    assert_eq!(c.partition("r", 0).replicas, [1, 3, 2]);
    // Partial progress: no completion while 3 is out of sync.
    alter_r(&mut c, &[1]);
    assert!(c.partition("r", 0).is_reassigning());
    alter_r(&mut c, &[1, 3]);
    let p = c.partition("r", 0);
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader),
        (vec![1, 3], vec![1, 3], 1)
    );
    assert_eq!(
        p.leader_epoch, 1,
        "broker 2 left: fenced by a new leader epoch"
    );
    assert!(!p.is_reassigning());
}

#[test]
fn a_reorder_or_a_shrink_within_the_isr_completes_at_once() {
    let mut c = reassign_cluster();
    reassign(&mut c, Some(vec![2, 1])).unwrap();
    let p = c.partition("r", 0);
    assert_eq!(
        (p.replicas.clone(), p.leader, p.leader_epoch),
        (vec![2, 1], 1, 0)
    );
    assert!(!p.is_reassigning());
    // The same assignment again: nothing to write.
    let changes = c.changes.len();
    reassign(&mut c, Some(vec![2, 1])).unwrap();
    assert_eq!(c.changes.len(), changes);
    reassign(&mut c, Some(vec![2])).unwrap();
    let p = c.partition("r", 0);
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader, p.leader_epoch),
        (vec![2], vec![2], 2, 1)
    );
}

#[test]
fn a_cancellation_returns_to_the_original_replicas() {
    let mut c = reassign_cluster();
    reassign(&mut c, Some(vec![3, 2])).unwrap();
    assert_eq!(c.partition("r", 0).replicas, [3, 2, 1]);
    let before = c.partition("r", 0).clone();
    reassign(&mut c, None).unwrap();
    let p = c.partition("r", 0);
    // The original replicas in the order the reassignment kept them (Kafka's
    // `originalReplicas`: the replicas without the added ones).
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader),
        (vec![2, 1], vec![1, 2], 1)
    );
    assert!(!p.is_reassigning());
    assert_eq!(
        p.leader_epoch,
        before.leader_epoch + 1,
        "the added replica is fenced"
    );
    assert!(matches!(
        reassign(&mut c, None),
        Err(ReassignmentError::NoReassignmentInProgress)
    ));
}

#[test]
fn a_cancellation_that_needs_an_unclean_election_is_refused_unless_enabled() {
    let mut c = reassign_cluster();
    reassign(&mut c, Some(vec![1, 2, 3])).unwrap();
    alter_r(&mut c, &[1, 2, 3]);
    assert!(
        !c.partition("r", 0).is_reassigning(),
        "an RF increase completes with 3 in sync"
    );
    reassign(&mut c, Some(vec![3])).unwrap();
    assert_eq!(c.partition("r", 0).leader, 3);
    // Now move back to [1] and lose 3 from the ISR… only 3 is in sync after the move to [3]:
    reassign(&mut c, Some(vec![1])).unwrap();
    assert_eq!(c.partition("r", 0).adding_replicas, [1]);
    assert_eq!(c.partition("r", 0).isr, [3]);
    // Cancelling keeps [3]: it was the original replica; nothing unclean.
    reassign(&mut c, None).unwrap();
    assert_eq!(c.partition("r", 0).replicas, [3]);
    // A partition whose only in-sync replicas are being added (a state Kafka reaches through
    // an unclean election) cannot go back cleanly.
    reassign(&mut c, Some(vec![1])).unwrap();
    let partition = &mut c.image.topics.get_mut("r").unwrap().partitions[0];
    (partition.isr, partition.leader) = (vec![1], -1);
    match reassign(&mut c, None) {
        Err(ReassignmentError::InvalidReplicaAssignment { reason }) => assert_eq!(
            reason,
            "Unable to revert partition assignment for r:0 because it would require an unclean \
             leader election."
        ),
        other => panic!("{other:?}"),
    }
    c.run(&ControllerOp::AlterTopicConfig {
        name: "r".into(),
        changes: vec![(UNCLEAN_LEADER_ELECTION_ENABLE.into(), Some("true".into()))],
        validate_only: false,
    })
    .unwrap();
    reassign(&mut c, None).unwrap();
    let p = c.partition("r", 0);
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader),
        (vec![3], vec![3], 3)
    );
}

#[test]
fn invalid_reassignments_are_refused_per_partition_with_kafkas_errors() {
    let mut c = reassign_cluster();
    let invalid = |r: Result<(), ReassignmentError>| match r {
        Err(ReassignmentError::InvalidReplicaAssignment { reason }) => reason,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        invalid(reassign(&mut c, Some(vec![]))),
        "The manual partition assignment includes an empty replica list."
    );
    assert_eq!(
        invalid(reassign(&mut c, Some(vec![2, 2]))),
        "The manual partition assignment includes the broker 2 more than once."
    );
    assert_eq!(
        invalid(reassign(&mut c, Some(vec![1, 9]))),
        "The manual partition assignment includes broker 9, but no such broker is registered."
    );
    assert_eq!(
        reassign_with(&mut c, "nope", 0, Some(vec![1]), true),
        Err(ReassignmentError::UnknownTopic {
            topic: "nope".into()
        })
    );
    assert_eq!(
        reassign_with(&mut c, "r", 1, Some(vec![1]), true),
        Err(ReassignmentError::UnknownPartition {
            topic: "r".into(),
            partition: 1
        })
    );
    assert_eq!(
        reassign_with(&mut c, "r", 0, Some(vec![1, 2, 3]), false),
        Err(ReassignmentError::InvalidReplicationFactor {
            current: 2,
            target: 3
        })
    );
    assert!(
        !c.partition("r", 0).is_reassigning(),
        "refusals change nothing"
    );
    // One request: a refused partition does not stop the others.
    c.create("s", 2, 1, BTreeMap::new()).unwrap();
    let op = ControllerOp::AlterPartitionReassignments {
        topics: vec![
            ("s".into(), vec![(0, Some(vec![3])), (1, None)]),
            ("r".into(), vec![(0, Some(vec![3, 1]))]),
        ],
        allow_replication_factor_change: true,
    };
    c.run(&op).unwrap();
    let ControllerAnswer::AlterPartitionReassignments { results } = op.answer(&c.before, &c.image)
    else {
        panic!()
    };
    assert_eq!(results[0].partitions[0], (0, Ok(())));
    assert_eq!(
        results[0].partitions[1],
        (1, Err(ReassignmentError::NoReassignmentInProgress))
    );
    assert_eq!(results[1].partitions[0], (0, Ok(())));
    assert_eq!(c.partition("r", 0).adding_replicas, [3]);
}

#[test]
fn reassignments_survive_a_snapshot_and_older_partition_records_still_decode() {
    let mut c = reassign_cluster();
    reassign(&mut c, Some(vec![2, 3])).unwrap();
    let mut rebuilt = MetadataImage::new(c.image.cluster_id.clone());
    for r in c.image.to_records() {
        rebuilt.apply(&r).unwrap();
    }
    assert_eq!(rebuilt, c.image);
    let id = "00000000-0000-0000-0000-000000000007";
    let records = [
        format!(r#"{{"type":"Topic","name":"o","topic_id":"{id}"}}"#),
        format!(
            r#"{{"type":"Partition","partition_id":0,"topic_id":"{id}","replicas":[1],
            "isr":[1],"leader":1,"leader_epoch":0,"partition_epoch":0}}"#
        ),
        format!(r#"{{"type":"PartitionChange","partition_id":0,"topic_id":"{id}","isr":[1]}}"#),
    ];
    let mut image = MetadataImage::new("c".into());
    for json in &records {
        let record: MetadataRecord = serde_json::from_str(json).unwrap();
        image.apply(&record).unwrap();
    }
    let p = &image.topics["o"].partitions[0];
    assert!(!p.is_reassigning());
    assert_eq!(p.partition_epoch, 1);
    // Nothing new is written for a partition that is not being reassigned.
    let json = serde_json::to_string(&image.to_records()).unwrap();
    assert!(
        !json.contains("adding_replicas") && !json.contains("removing_replicas"),
        "{json}"
    );
}
