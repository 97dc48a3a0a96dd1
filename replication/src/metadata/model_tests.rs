//! Model tests of the metadata state machine: random op sequences through the proposer, then
//! `apply`, the snapshot and the log checked against each other.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use uuid::Uuid;

const NAMES: &[&str] = &["a", "b", "c", "__consumer_offsets", "bad name"];

fn no_check(_: &BTreeMap<String, String>) -> Result<(), String> {
    Ok(())
}

fn no_broker_check(_: &BTreeMap<String, BTreeMap<String, String>>) -> Result<(), String> {
    Ok(())
}

/// Refuses a `bad` key on any broker resource, as [`check`] does for topics.
fn broker_check(configs: &BTreeMap<String, BTreeMap<String, String>>) -> Result<(), String> {
    match configs.values().any(|c| c.contains_key("bad")) {
        true => Err("Cannot update these configs dynamically: [bad]".into()),
        false => Ok(()),
    }
}

/// Refuses a `bad` key, so the proposer's config refusal is exercised.
fn check(configs: &BTreeMap<String, String>) -> Result<(), String> {
    match configs.contains_key("bad") {
        true => Err("bad is not a config".into()),
        false => Ok(()),
    }
}

fn op_strategy() -> impl Strategy<Value = ControllerOp> {
    let name = proptest::sample::select(NAMES).prop_map(str::to_string);
    let key = proptest::sample::select(&["retention.ms", "segment.bytes", "bad"][..])
        .prop_map(str::to_string);
    let value = proptest::option::of("[0-9]{1,3}");
    let broker = proptest::sample::select(&["", "1", "2"][..]).prop_map(str::to_string);
    let broker_changes = proptest::collection::vec((key.clone(), value.clone()), 0..3);
    prop_oneof![
        (name.clone(), 0..5i32, any::<bool>(), any::<bool>()).prop_map(
            |(name, partitions, internal, validate_only)| ControllerOp::CreateTopic {
                assignment: None,
                name,
                partitions,
                replication_factor: -1,
                overrides: BTreeMap::from([("retention.ms".into(), "7".into())]),
                internal,
                validate_only,
            }
        ),
        name.clone()
            .prop_map(|name| ControllerOp::DeleteTopic { name }),
        (name.clone(), 0..8i32).prop_map(|(name, total)| ControllerOp::CreatePartitions {
            assignment: None,
            name,
            total,
            validate_only: false,
        }),
        (
            name.clone(),
            proptest::collection::vec((key.clone(), value.clone()), 0..3)
        )
            .prop_map(|(name, changes)| ControllerOp::AlterTopicConfig {
                name,
                changes,
                validate_only: false,
            }),
        (
            name,
            proptest::collection::btree_map(key, "[0-9]{1,3}", 0..3)
        )
            .prop_map(|(name, overrides)| ControllerOp::ReplaceTopicConfig {
                name,
                overrides,
                validate_only: false,
            }),
        (broker, broker_changes, any::<bool>(), any::<bool>()).prop_map(
            |(resource_name, changes, replace, validate_only)| ControllerOp::AlterBrokerConfig {
                resource_name,
                changes,
                replace,
                validate_only,
            }
        ),
        Just(ControllerOp::AllocateProducerIds),
    ]
}

/// Runs `ops` as the controller does (propose, then apply unless validate-only), with topic
/// ids drawn from a counter; returns the changes appended and the final image.
fn run_ops(ops: &[ControllerOp]) -> (Vec<Vec<MetadataRecord>>, MetadataImage) {
    let mut image = MetadataImage::new("cluster".into());
    let mut changes = vec![vec![register_single_node()]];
    image.apply(&changes[0][0]).unwrap();
    for (i, op) in ops.iter().enumerate() {
        let ctx = ProposeContext {
            broker_id: 1,
            controller_id: 0,
            broker_epoch: 0,
            new_topic_id: Uuid::from_u128(u128::try_from(i).unwrap() + 1),
            check_topic_config: &check,
            check_broker_configs: &broker_check,
            default_replication_factor: 1,
            placement_seed: 0,
            broker_session_live: &all_live,
        };
        let Ok(records) = propose(&image, op, &ctx) else {
            continue;
        };
        if op.validate_only() || records.is_empty() {
            continue;
        }
        for r in &records {
            image.apply(r).expect("proposed records apply");
        }
        changes.push(records);
    }
    (changes, image)
}

/// Broker 1 registered unfenced, as the single-node broker registers itself at start-up.
fn register_single_node() -> MetadataRecord {
    MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id: 1,
        incarnation_id: Uuid::from_u128(1),
        broker_epoch: 0,
        end_points: Vec::new(),
        rack: None,
        fenced: false,
        in_controlled_shutdown: false,
    })
}

fn all_live(_: i32) -> bool {
    true
}

/// An image with only broker 1, registered and unfenced.
fn single_node_image() -> MetadataImage {
    let mut image = MetadataImage::new("c".into());
    image.apply(&register_single_node()).unwrap();
    image
}

fn replayed(changes: &[Vec<MetadataRecord>]) -> MetadataImage {
    let mut image = MetadataImage::new("cluster".into());
    for r in changes.iter().flatten() {
        image.apply(r).expect("records apply");
    }
    image
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The same records give the same image, and the image's own records rebuild it.
    #[test]
    fn apply_is_deterministic(ops in proptest::collection::vec(op_strategy(), 0..40)) {
        let (changes, image) = run_ops(&ops);
        prop_assert_eq!(&replayed(&changes), &image);
        prop_assert_eq!(&replayed(&changes), &replayed(&changes));
        let mut rebuilt = MetadataImage::new(image.cluster_id.clone());
        for r in image.to_records() {
            rebuilt.apply(&r).expect("snapshot records apply");
        }
        prop_assert_eq!(&rebuilt, &image);
        for (name, topic) in &image.topics {
            prop_assert_eq!(image.topic_names_by_id.get(&topic.id), Some(name));
            prop_assert!(!topic.partitions.is_empty());
            // Only the broker's own (internal) creation may take a reserved name.
            prop_assert!(topic.internal || !INTERNAL_TOPIC_NAMES.contains(&name.as_str()));
        }
        prop_assert_eq!(image.topic_names_by_id.len(), image.topics.len());
    }

    /// Appending each change, snapshotting past a small bound, and reopening gives the image.
    #[test]
    fn snapshot_and_replay_equal_the_image(
        ops in proptest::collection::vec(op_strategy(), 0..40),
        bound in 0u64..2000,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (changes, _) = run_ops(&ops);
        let mut image = MetadataImage::new("cluster".into());
        let mut store = MetadataStore::create(dir.path(), &image).unwrap();
        store.set_snapshot_log_bytes(bound);
        for change in &changes {
            store.append(change).unwrap();
            for r in change {
                image.apply(r).unwrap();
            }
            store.maybe_snapshot(&image).unwrap();
        }
        let next_offset = store.next_offset();
        drop(store);
        let opened = MetadataStore::open(dir.path()).unwrap().expect("metadata exists");
        prop_assert_eq!(&opened.image, &image);
        prop_assert_eq!(opened.dropped_tail_bytes, 0);
        prop_assert_eq!(opened.store.next_offset(), next_offset);
    }

    /// A last frame cut short or with a flipped byte is dropped, and appends go on after it.
    #[test]
    fn torn_or_corrupt_tail_is_dropped(
        ops in proptest::collection::vec(op_strategy(), 1..20),
        cut in any::<prop::sample::Index>(),
        flip in any::<bool>(),
    ) {
        let (changes, _) = run_ops(&ops);
        prop_assume!(!changes.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let mut store = MetadataStore::create(dir.path(), &MetadataImage::new("cluster".into())).unwrap();
        let log_path = dir.path().join(LOG_FILE_NAME);
        let mut before_last = 0;
        for change in &changes {
            before_last = std::fs::metadata(&log_path).unwrap().len();
            store.append(change).unwrap();
        }
        drop(store);
        let mut bytes = std::fs::read(&log_path).unwrap();
        let last_frame = usize::try_from(before_last).unwrap()..bytes.len();
        if flip {
            bytes[last_frame.start + cut.index(last_frame.len())] ^= 0x40;
        } else {
            // At least one byte of the frame is left: a cut at its start is a clean end.
            bytes.truncate(last_frame.start + 1 + cut.index(last_frame.len() - 1));
        }
        std::fs::write(&log_path, &bytes).unwrap();
        let kept = &changes[..changes.len() - 1];
        let mut opened = MetadataStore::open(dir.path()).unwrap().expect("metadata exists");
        prop_assert_eq!(&opened.image, &replayed(kept));
        prop_assert!(opened.dropped_tail_bytes > 0);
        // The log goes on from the cut: the last change appended again replays.
        opened.store.append(&changes[changes.len() - 1]).unwrap();
        drop(opened);
        let reopened = MetadataStore::open(dir.path()).unwrap().expect("metadata exists");
        prop_assert_eq!(&reopened.image, &replayed(&changes));
        prop_assert_eq!(reopened.dropped_tail_bytes, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever follows a valid header, opening the log never panics: it replays a prefix,
    /// drops a torn tail, or reports corruption.
    #[test]
    fn any_log_bytes_open_without_panic(tail in proptest::collection::vec(any::<u8>(), 0..256)) {
        let dir = tempfile::tempdir().unwrap();
        drop(MetadataStore::create(dir.path(), &MetadataImage::new("c".into())).unwrap());
        let log_path = dir.path().join(LOG_FILE_NAME);
        let mut bytes = std::fs::read(&log_path).unwrap();
        bytes.extend_from_slice(&tail);
        std::fs::write(&log_path, &bytes).unwrap();
        let _ = MetadataStore::open(dir.path());
    }
}

fn ctx(topic_id: u128) -> ProposeContext<'static> {
    ProposeContext {
        broker_id: 1,
        controller_id: 0,
        broker_epoch: 3,
        new_topic_id: Uuid::from_u128(topic_id),
        check_topic_config: &no_check,
        check_broker_configs: &no_broker_check,
        default_replication_factor: 1,
        placement_seed: 0,
        broker_session_live: &all_live,
    }
}

fn create(name: &str, partitions: i32, internal: bool) -> ControllerOp {
    ControllerOp::CreateTopic {
        assignment: None,
        name: name.into(),
        partitions,
        replication_factor: -1,
        overrides: BTreeMap::new(),
        internal,
        validate_only: false,
    }
}

fn apply_all(image: &mut MetadataImage, records: &[MetadataRecord]) {
    for r in records {
        image.apply(r).unwrap();
    }
}

#[test]
fn internal_topics_are_refused_to_clients_by_flag_and_reserved_name() {
    let mut image = single_node_image();
    let refused = propose(&image, &create(CONSUMER_OFFSETS_TOPIC, 3, false), &ctx(1));
    assert!(matches!(
        refused,
        Err(ControllerError::InternalTopic {
            operation: TopicOperation::Create,
            ..
        })
    ));
    let records = propose(&image, &create(CONSUMER_OFFSETS_TOPIC, 3, true), &ctx(1)).unwrap();
    apply_all(&mut image, &records);
    assert!(image.topics[CONSUMER_OFFSETS_TOPIC].internal);
    assert!(is_internal(&image, CONSUMER_OFFSETS_TOPIC));
    let delete = ControllerOp::DeleteTopic {
        name: CONSUMER_OFFSETS_TOPIC.into(),
    };
    let refused = propose(&image, &delete, &ctx(2)).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "'__consumer_offsets' is an internal topic and cannot be deleted"
    );
    let records = propose(&image, &create("orders", 2, false), &ctx(2)).unwrap();
    apply_all(&mut image, &records);
    assert!(!is_internal(&image, "orders"));
    assert!(check_not_internal(&image, "orders", TopicOperation::Produce).is_ok());
}

#[test]
fn producer_id_blocks_move_forward() {
    let mut image = MetadataImage::new("c".into());
    for block in 1..=3 {
        let records = propose(&image, &ControllerOp::AllocateProducerIds, &ctx(1)).unwrap();
        apply_all(&mut image, &records);
        assert_eq!(
            image.producer_ids.next_producer_id,
            block * PRODUCER_ID_BLOCK_SIZE
        );
    }
    let backwards = MetadataRecord::ProducerIds(ProducerIdsRecord {
        broker_id: 1,
        broker_epoch: 3,
        next_producer_id: PRODUCER_ID_BLOCK_SIZE,
    });
    assert!(matches!(
        image.apply(&backwards),
        Err(ApplyError::ProducerIdsBackwards { .. })
    ));
}

#[test]
fn partition_change_moves_the_epochs() {
    let mut image = single_node_image();
    let records = propose(&image, &create("t", 1, false), &ctx(9)).unwrap();
    apply_all(&mut image, &records);
    let change = |leader, isr| {
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 0,
            topic_id: Uuid::from_u128(9),
            isr,
            leader,
            replicas: None,
            removing_replicas: None,
            adding_replicas: None,
        })
    };
    image.apply(&change(None, Some(vec![1, 2]))).unwrap();
    let p = &image.topics["t"].partitions[0];
    assert_eq!(
        (p.leader_epoch, p.partition_epoch, p.isr.clone()),
        (0, 1, vec![1, 2])
    );
    image.apply(&change(Some(2), None)).unwrap();
    let p = &image.topics["t"].partitions[0];
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 2));
}

#[test]
fn config_changes_are_diffs_and_validate_the_whole_set() {
    let mut image = single_node_image();
    let op = ControllerOp::CreateTopic {
        assignment: None,
        name: "t".into(),
        partitions: 1,
        replication_factor: 1,
        overrides: BTreeMap::from([("a".into(), "1".into()), ("b".into(), "2".into())]),
        internal: false,
        validate_only: false,
    };
    let records = propose(&image, &op, &ctx(1)).unwrap();
    apply_all(&mut image, &records);
    let replace = ControllerOp::ReplaceTopicConfig {
        name: "t".into(),
        overrides: BTreeMap::from([("b".into(), "2".into()), ("c".into(), "3".into())]),
        validate_only: false,
    };
    let records = propose(&image, &replace, &ctx(2)).unwrap();
    assert_eq!(
        records.len(),
        2,
        "a removed, c set, b unchanged: {records:?}"
    );
    apply_all(&mut image, &records);
    assert_eq!(
        image.topics["t"].configs,
        BTreeMap::from([("b".into(), "2".into()), ("c".into(), "3".into())])
    );
    let bad = ControllerOp::AlterTopicConfig {
        name: "t".into(),
        changes: vec![("bad".into(), Some("1".into()))],
        validate_only: false,
    };
    let checked = ProposeContext {
        check_topic_config: &check,
        ..ctx(3)
    };
    assert!(matches!(
        propose(&image, &bad, &checked),
        Err(ControllerError::InvalidConfig { .. })
    ));
}

/// A BROKER ConfigRecord (Kafka's shape: resource type 4, the broker id or "" for the
/// cluster default) sets and removes one dynamic config; the proposer's records for a change
/// apply to exactly the new set, and a snapshot of the image keeps it.
#[test]
fn broker_config_records_apply_and_survive_a_snapshot() {
    let mut image = MetadataImage::new("c".into());
    let set = |resource_name: &str, name: &str, value: Option<&str>| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: CONFIG_RESOURCE_BROKER,
            resource_name: resource_name.into(),
            name: name.into(),
            value: value.map(str::to_string),
        })
    };
    image
        .apply(&set("", "log.retention.ms", Some("5000")))
        .unwrap();
    image
        .apply(&set("1", "log.retention.ms", Some("7000")))
        .unwrap();
    image
        .apply(&set("1", "message.max.bytes", Some("2048")))
        .unwrap();
    assert_eq!(
        image.broker_configs[""],
        BTreeMap::from([("log.retention.ms".into(), "5000".into())])
    );
    assert_eq!(image.broker_configs["1"].len(), 2);
    image.apply(&set("1", "message.max.bytes", None)).unwrap();
    image.apply(&set("", "log.retention.ms", None)).unwrap();
    assert!(
        !image.broker_configs.contains_key(""),
        "an emptied resource leaves the image"
    );
    assert_eq!(
        image.broker_configs["1"],
        BTreeMap::from([("log.retention.ms".into(), "7000".into())])
    );
    // Removing a key that is not set changes nothing.
    let before = image.clone();
    image.apply(&set("2", "log.retention.ms", None)).unwrap();
    assert_eq!(image, before);
    let other = MetadataRecord::Config(ConfigRecord {
        resource_type: 3,
        resource_name: "1".into(),
        name: "k".into(),
        value: Some("v".into()),
    });
    assert_eq!(
        image.apply(&other),
        Err(ApplyError::ConfigResourceType { resource_type: 3 })
    );

    // The proposer: AlterConfigs' replace clears the set, IncrementalAlterConfigs' changes
    // apply in order; records are the diff, none for no change.
    let replace = ControllerOp::AlterBrokerConfig {
        resource_name: "1".into(),
        changes: vec![("log.segment.bytes".into(), Some("1048576".into()))],
        replace: true,
        validate_only: false,
    };
    let records = propose(&image, &replace, &ctx(1)).unwrap();
    assert_eq!(
        records,
        [
            set("1", "log.retention.ms", None),
            set("1", "log.segment.bytes", Some("1048576"))
        ]
    );
    apply_all(&mut image, &records);
    assert!(propose(&image, &replace, &ctx(1)).unwrap().is_empty());
    let incremental = ControllerOp::AlterBrokerConfig {
        resource_name: "".into(),
        changes: vec![
            ("log.retention.ms".into(), Some("1".into())),
            ("log.retention.ms".into(), Some("2".into())),
        ],
        replace: false,
        validate_only: false,
    };
    let records = propose(&image, &incremental, &ctx(1)).unwrap();
    assert_eq!(records, [set("", "log.retention.ms", Some("2"))]);
    apply_all(&mut image, &records);
    let bad = ControllerOp::AlterBrokerConfig {
        resource_name: "1".into(),
        changes: vec![("bad".into(), Some("1".into()))],
        replace: false,
        validate_only: false,
    };
    let checked = ProposeContext {
        check_broker_configs: &broker_check,
        ..ctx(2)
    };
    let refused = propose(&image, &bad, &checked).unwrap_err();
    assert!(matches!(
        refused,
        ControllerError::InvalidBrokerConfig { ref resource_name, .. } if resource_name == "1"
    ));
    assert_eq!(
        refused.to_string(),
        "Cannot update these configs dynamically: [bad]"
    );

    // Replaying the log, and then a snapshot, keep the broker configs.
    let dir = tempfile::tempdir().unwrap();
    let mut store = MetadataStore::create(dir.path(), &MetadataImage::new("c".into())).unwrap();
    store.append(&image.to_records()).unwrap();
    drop(store);
    let mut opened = MetadataStore::open(dir.path())
        .unwrap()
        .expect("metadata exists");
    assert_eq!(opened.image, image, "log replay");
    opened.store.set_snapshot_log_bytes(0);
    assert!(opened.store.maybe_snapshot(&image).unwrap());
    drop(opened);
    let opened = MetadataStore::open(dir.path())
        .unwrap()
        .expect("metadata exists");
    assert_eq!(opened.image, image, "snapshot");
    assert_eq!(opened.image.broker_configs[""]["log.retention.ms"], "2");
    assert_eq!(
        opened.image.broker_configs["1"]["log.segment.bytes"],
        "1048576"
    );
}

#[test]
fn topic_names_follow_kafka_rules() {
    assert!(validate_topic_name("orders.v1_a-b").is_ok());
    for bad in ["", ".", "..", "a b", "ü", &"x".repeat(250)] {
        assert!(validate_topic_name(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_largest_topic_fits_one_frame() {
    let dir = tempfile::tempdir().unwrap();
    let image = single_node_image();
    let op = create("big", PARTITIONS_PER_TOPIC_MAX, false);
    let records = propose(&image, &op, &ctx(1)).unwrap();
    let mut store = MetadataStore::create(dir.path(), &image).unwrap();
    store.append(&records).unwrap();
}
