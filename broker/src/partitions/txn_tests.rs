//! The partition side of transactions (issue #28) through [`replication::Partition`] over a
//! real log on disk: a read_committed read stops at the last stable offset and lists the
//! aborted transactions of its range; a read_committed fetch parked at the LSO is woken by
//! the marker that moves it; ListOffsets read_committed answers the LSO; a marker's refusals
//! map to Kafka's codes. Not checked here: the routing (the compat tests,
//! tests/compat/test_transactions.py, go through a broker).

use super::service::check_produce;
use crate::errors::{code, partition_op_error_code};
use crate::seam::ShardRuntime;
use bytes::Bytes;
use net::kafka_protocol::error::ResponseError;
use replication::runtime::{Clock, NodeId, Runtime};
use replication::{Acks, Isolation, OffsetSpec, Partition, PartitionError};
use std::rc::Rc;
use std::time::Duration;
use storage::{
    batch_crc, build_batch, AbortedTxn, BatchCache, LogConfig, Offset, PartitionLog, TimestampMs,
    TxnMarker, TxnResult,
};
use tuning::config::TopicConfig;

type LocalPartition = Partition<PartitionLog>;

const TIMEOUT: Duration = Duration::from_secs(5);

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_millis()).expect("fits i64")
}

/// A batch of `values` from producer `pid` at sequence `seq`, transactional or not.
fn batch(values: &[&[u8]], pid: i64, seq: i32, transactional: bool) -> Bytes {
    let mut b = build_batch(TimestampMs(now_ms()), values).to_vec();
    let attributes: i16 = if transactional { 0x10 } else { 0 };
    b[21..23].copy_from_slice(&attributes.to_be_bytes());
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = batch_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

async fn produce(partition: &Rc<LocalPartition>, records: Bytes) -> i64 {
    let batches = check_produce(&records, &TopicConfig::default(), now_ms()).expect("valid");
    let appended = partition
        .append(batches, Acks::All, TIMEOUT)
        .await
        .expect("appended");
    appended.base_offset.0
}

fn marker(pid: i64, result: TxnResult) -> TxnMarker {
    TxnMarker {
        producer_id: pid,
        producer_epoch: 0,
        result,
        coordinator_epoch: 0,
    }
}

async fn open_partition(dir: &std::path::Path) -> Rc<LocalPartition> {
    let log = PartitionLog::open(dir, LogConfig::default(), &BatchCache::new(1 << 20))
        .await
        .expect("open log");
    Rc::new(Partition::new(log, NodeId(1), Rc::new(ShardRuntime)))
}

fn bases(read: &replication::Read) -> Vec<i64> {
    read.batches
        .iter()
        .map(|b| b.header().base_offset.0)
        .collect()
}

#[test]
fn read_committed_stops_at_the_lso_lists_aborts_and_is_woken_by_markers() {
    crate::rt::on_executor(|| async {
        let dir = tempfile::tempdir().expect("temp dir");
        let partition = open_partition(dir.path()).await;
        let (a, b, c) = (1000, 2000, 3000);
        assert_eq!(produce(&partition, batch(&[b"p0"], -1, -1, false)).await, 0);
        assert_eq!(
            produce(&partition, batch(&[b"a1", b"a2"], a, 0, true)).await,
            1
        );
        let committed = partition
            .append_txn_marker(marker(a, TxnResult::Commit), TIMEOUT)
            .await
            .expect("commit");
        assert_eq!(committed.base_offset, Offset(3));
        assert_eq!(produce(&partition, batch(&[b"b1"], b, 0, true)).await, 4);
        partition
            .append_txn_marker(marker(b, TxnResult::Abort), TIMEOUT)
            .await
            .expect("abort");
        assert_eq!(produce(&partition, batch(&[b"c1"], c, 0, true)).await, 6);
        assert_eq!(partition.high_watermark(), Offset(7));
        assert_eq!(partition.upper_bound(Isolation::LastStable), Offset(6));

        let rc = partition
            .read(Offset(0), 1 << 20, Isolation::LastStable)
            .await
            .expect("read");
        assert_eq!(bases(&rc), vec![0, 1, 3, 4, 5]);
        assert_eq!(rc.last_stable_offset, Offset(6));
        let aborted = AbortedTxn {
            producer_id: b,
            first_offset: Offset(4),
        };
        assert_eq!(rc.aborted, Some(vec![aborted]));
        // A read ending before the aborted transaction starts lists nothing.
        let first = partition
            .read(Offset(0), 1, Isolation::LastStable)
            .await
            .expect("read");
        assert_eq!((bases(&first), first.aborted), (vec![0], Some(vec![])));
        let ru = partition
            .read(Offset(0), 1 << 20, Isolation::HighWatermark)
            .await
            .expect("read");
        assert_eq!(bases(&ru), vec![0, 1, 3, 4, 5, 6]);
        assert_eq!((ru.aborted, ru.last_stable_offset), (None, Offset(6)));
        let latest = |isolation| partition.list_offsets(OffsetSpec::Latest, isolation);
        assert_eq!(
            latest(Isolation::LastStable).await.unwrap().offset,
            Some(Offset(6))
        );
        assert_eq!(
            latest(Isolation::HighWatermark).await.unwrap().offset,
            Some(Offset(7))
        );

        // Parked at the LSO (c's batch is below the HW, above the LSO), woken by c's commit.
        let started = ShardRuntime.now();
        let deadline = started + Duration::from_secs(20);
        let parked = partition.fetch(
            Offset(6),
            1 << 20,
            1,
            Isolation::LastStable,
            deadline,
            std::future::pending(),
        );
        let commit = async {
            ShardRuntime.sleep(Duration::from_millis(100)).await;
            partition
                .append_txn_marker(marker(c, TxnResult::Commit), TIMEOUT)
                .await
                .expect("commit c")
        };
        let (read, _) = futures_util::future::join(parked, commit).await;
        let read = read.expect("fetch");
        assert!(
            ShardRuntime.now().saturating_duration_since(started) < Duration::from_secs(10),
            "woken by the marker, not the deadline"
        );
        assert_eq!(bases(&read)[0], 6);
        // Woken at the marker's append: the LSO is at least c's end (the high watermark then),
        // the marker's own offset once it is written.
        assert!(read.last_stable_offset >= Offset(7), "{read:?}");
        assert_eq!(
            latest(Isolation::LastStable).await.unwrap().offset,
            Some(Offset(8))
        );
        partition.log().close().await.expect("close");
    });
}

#[test]
fn marker_refusals_map_to_kafkas_codes() {
    crate::rt::on_executor(|| async {
        let dir = tempfile::tempdir().expect("temp dir");
        let partition = open_partition(dir.path()).await;
        let pid = 77;
        let mut b = batch(&[b"x"], pid, 0, true).to_vec();
        b[51..53].copy_from_slice(&1i16.to_be_bytes()); // epoch 1
        let crc = batch_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        produce(&partition, Bytes::from(b)).await;
        let code_of = |e: PartitionError| {
            partition_op_error_code(&crate::partitions::PartitionOpError::Partition(e))
        };
        let stale = partition
            .append_txn_marker(marker(pid, TxnResult::Commit), TIMEOUT)
            .await
            .expect_err("epoch 0 < 1");
        assert_eq!(code_of(stale), code(ResponseError::InvalidProducerEpoch));
        let newer = TxnMarker {
            producer_epoch: 1,
            coordinator_epoch: 4,
            ..marker(pid, TxnResult::Commit)
        };
        partition
            .append_txn_marker(newer, TIMEOUT)
            .await
            .expect("commit");
        let fenced = TxnMarker {
            coordinator_epoch: 2,
            ..newer
        };
        let refused = partition
            .append_txn_marker(fenced, TIMEOUT)
            .await
            .expect_err("older coordinator");
        assert_eq!(
            code_of(refused),
            code(ResponseError::TransactionCoordinatorFenced)
        );
        // A client's control batch.
        let control = {
            let mut b = batch(&[b"y"], pid, 1, true).to_vec();
            b[21..23].copy_from_slice(&0x30i16.to_be_bytes());
            let crc = batch_crc(&b);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
            Bytes::from(b)
        };
        let batches = check_produce(&control, &TopicConfig::default(), now_ms()).expect("valid");
        let refused = partition
            .append(batches, Acks::All, TIMEOUT)
            .await
            .expect_err("a client's marker");
        assert_eq!(code_of(refused), code(ResponseError::InvalidRecord));
        partition.log().close().await.expect("close");
    });
}
