//! Tests of the public API: config output, parsers, checks on fake sysfs/proc text, and a tiny
//! real disk probe. No timing is asserted anywhere (figures depend on the machine's load).

use std::path::Path;
use std::time::Duration;
use tuning::*;

fn fake_topology() -> CpuTopology {
    choose_shard_cpus(
        &[0, 1, 2, 3],
        &[0, 1, 2, 3],
        &[
            (0, vec![0, 2]),
            (1, vec![1, 3]),
            (2, vec![0, 2]),
            (3, vec![1, 3]),
        ],
    )
}

fn fake_disk(fsync_p99_us: f64) -> DiskReport {
    let lat = |p50: f64, p99: f64| LatencySummary {
        ops: 100,
        p50_us: p50,
        p99_us: p99,
        max_us: p99 * 2.0,
    };
    let mut cells = Vec::new();
    for &bs in &BLOCK_SIZES_BYTES {
        for &qd in &QUEUE_DEPTHS {
            for kind in [IoKind::Write, IoKind::Read] {
                cells.push(CellResult {
                    kind,
                    block_bytes: bs,
                    depth: qd,
                    elapsed: Duration::from_millis(500),
                    mib_per_sec: (bs as f64 / 4096.0).min(300.0) * qd as f64,
                    latency: lat(60.0, 130.0),
                });
            }
        }
    }
    DiskReport {
        dir: "/data".into(),
        cpu: Some(0),
        region_bytes: 256 << 20,
        fill_elapsed: Duration::from_millis(200),
        fill_mib_per_sec: 1200.0,
        cells,
        fsync: FsyncResult {
            fdatasync: lat(30.0, fsync_p99_us),
            write_and_fdatasync: lat(90.0, fsync_p99_us + 100.0),
        },
        elapsed: Duration::from_secs(60),
        loadavg_1m: (Some(0.1), Some(0.9)),
        other_cpu_cores: Some(0.05),
    }
}

fn render(fsync_p99_us: f64, mem: Option<u64>, free: Option<u64>) -> String {
    let cpus = fake_topology();
    let disk = fake_disk(fsync_p99_us);
    let checks = [check_thp("[always] madvise never")];
    render_config(&TuneInputs {
        cpus: &cpus,
        disk: &disk,
        mem_total_bytes: mem,
        free_bytes: free,
        checks: &checks,
    })
}

#[test]
fn config_parses_as_toml_with_only_allowed_keys() {
    for (p99, mem, free) in [
        (80.0, Some(24u64 << 30), Some(65u64 << 30)),
        (5000.0, None, None),
        (80.0, Some(1 << 30), Some(1 << 30)),
    ] {
        let text = render(p99, mem, free);
        let table: toml::Table =
            toml::from_str(&text).unwrap_or_else(|e| panic!("config does not parse: {e}\n{text}"));
        for (k, v) in &table {
            assert!(
                ALLOWED_KEYS.contains(&k.as_str()),
                "key `{k}` not allowed\n{text}"
            );
            if k == "sluice.cores" {
                let s = v.as_str().expect("sluice.cores is a string");
                assert_eq!(parse_cpu_list(s).expect("cpu list"), vec![0, 1]);
            } else {
                assert!(
                    v.as_integer().is_some_and(|n| n > 0),
                    "`{k}` = {v} not a positive int"
                );
            }
        }
        assert!(table.contains_key("sluice.cores"));
        assert!(table.contains_key("num.partitions"));
        assert_eq!(
            table.contains_key("sluice.batch.cache.bytes"),
            mem.is_some()
        );
        assert_eq!(table.contains_key("log.segment.bytes"), free.is_some());
        // Kafka's flush defaults stay; the reasoning is a comment.
        assert!(!table.contains_key("log.flush.interval.messages"));
        if p99 < 1000.0 {
            assert!(text.contains("flush.messages=1"), "{text}");
        }
        // The disk table carries every cell.
        assert!(text.contains("1 MiB    64"), "{text}");
        assert!(text.contains("warn: thp"), "{text}");
    }
}

#[test]
fn config_values_follow_from_figures() {
    // 24 GiB / 8 / 2 shards = 1.5 GiB, capped to 1 GiB.
    assert_eq!(batch_cache_bytes(24 << 30, 2), 1 << 30);
    // 4 GiB / 8 / 2 = 256 MiB.
    assert_eq!(batch_cache_bytes(4 << 30, 2), 256 << 20);
    assert_eq!(batch_cache_bytes(0, 0), 16 << 20);
    assert_eq!(segment_bytes(65 << 30), 1 << 30);
    assert_eq!(segment_bytes(10 << 30), 128 << 20);
    assert_eq!(segment_bytes(0), 64 << 20);
    assert_eq!(
        parse_meminfo_total_bytes("MemTotal:       24684084 kB\nMemFree: 1 kB\n"),
        Some(24_684_084 * 1024)
    );
    assert_eq!(parse_meminfo_total_bytes("MemFree: 1 kB\n"), None);
}

#[test]
fn sibling_lists_parse() {
    assert_eq!(parse_cpu_list("0,4\n").expect("list"), vec![0, 4]);
    assert_eq!(parse_cpu_list("0-1").expect("range"), vec![0, 1]);
    assert_eq!(parse_cpu_list("2-3,6-7").expect("ranges"), vec![2, 3, 6, 7]);
    assert!(parse_cpu_list(" ").is_err());
    assert!(parse_cpu_list("1-").is_err());
    let t = fake_topology();
    assert_eq!(t.sibling_groups, vec![vec![0, 2], vec![1, 3]]);
    assert_eq!(t.shard_cpus, vec![0, 1]);
    assert_eq!(render_cores(&t.shard_cpus), "0-1");
}

#[test]
fn probe_cpus_reads_a_fake_sysfs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let allowed = {
        // Whatever this process may run on; make every allowed CPU one SMT group.
        let all: Vec<usize> = (0..1024)
            .filter(|c| Path::new(&format!("/sys/devices/system/cpu/cpu{c}")).exists())
            .collect();
        all
    };
    let list = render_cores(&allowed);
    std::fs::write(dir.path().join("online"), format!("{list}\n")).expect("write online");
    for c in &allowed {
        let topo = dir.path().join(format!("cpu{c}/topology"));
        std::fs::create_dir_all(&topo).expect("mkdir");
        std::fs::write(topo.join("thread_siblings_list"), format!("{list}\n")).expect("write");
    }
    let t = probe_cpus(dir.path()).expect("probe");
    assert_eq!(t.sibling_groups.len(), 1, "{t:?}");
    assert_eq!(t.shard_cpus.len(), 1, "{t:?}");
}

#[test]
fn checks_on_fake_text() {
    use CheckStatus::*;
    assert_eq!(check_memlock(Some(64 << 10), 1000).status, Warn);
    assert!(check_memlock(Some(64 << 10), 1000)
        .message
        .contains("ulimit -l unlimited"));
    assert_eq!(check_memlock(Some(64 << 10), 0).status, Ok);
    assert_eq!(check_memlock(Some(512 << 10), 1000).status, Ok);
    assert_eq!(check_memlock(None, 1000).status, Ok);

    assert_eq!(check_governor(&[]).status, Skip);
    let g = check_governor(&[(0, "performance\n".into()), (1, "powersave\n".into())]);
    assert_eq!(g.status, Warn);
    assert!(g.message.contains("cpu1=powersave") && g.message.contains("cpupower"));
    assert_eq!(check_governor(&[(0, "performance\n".into())]).status, Ok);

    let thp = check_thp("[always] madvise never\n");
    assert_eq!(thp.status, Warn);
    assert!(thp
        .message
        .contains("echo never > /sys/kernel/mm/transparent_hugepage/enabled"));
    assert_eq!(check_thp("always [madvise] never\n").status, Ok);
    assert_eq!(check_thp("always madvise never\n").status, Skip);

    assert_eq!(
        check_scheduler("vda", "none [mq-deadline] kyber bfq\n").status,
        Ok
    );
    assert_eq!(
        check_scheduler("nvme0n1", "[none] mq-deadline\n").status,
        Ok
    );
    let s = check_scheduler("sda", "mq-deadline kyber [bfq] none\n");
    assert_eq!(s.status, Warn);
    assert!(s
        .message
        .contains("echo none > /sys/block/sda/queue/scheduler"));

    let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
    assert_eq!(check_swap(header, Some("60\n")).status, Ok);
    let on = format!("{header}/swapfile  file  8388604  0  -2\n");
    let w = check_swap(&on, Some("60\n"));
    assert_eq!(w.status, Warn);
    assert!(w.message.contains("swapoff -a") && w.message.contains("vm.swappiness=60"));
    assert_eq!(check_swap(&on, Some("1\n")).status, Ok);

    assert_eq!(
        format!("{}", check_thp("[always]")).split(':').next(),
        Some("warn")
    );
    assert_eq!(selected_choice("performance\n"), Some("performance"));
    assert_eq!(selected_choice(""), None);
}

#[test]
fn block_device_of_resolves_a_partition_to_its_disk() {
    use std::os::unix::fs::MetadataExt;
    let data = tempfile::tempdir().expect("tempdir");
    let dev = std::fs::metadata(data.path()).expect("stat").dev();
    let (major, minor) = (libc_major(dev), libc_minor(dev));
    if major == 0 {
        // Overlay/tmpfs: the function must say so rather than fail.
        let err = block_device_of(data.path(), Path::new("/nonexistent")).expect_err("no dev");
        assert!(err.contains("without a block device"), "{err}");
        return;
    }
    let sys = tempfile::tempdir().expect("tempdir");
    let disk = sys.path().join("devices/virtio1/block/vdz");
    let part = disk.join("vdz1");
    std::fs::create_dir_all(disk.join("queue")).expect("mkdir");
    std::fs::create_dir_all(&part).expect("mkdir");
    std::fs::write(part.join("partition"), "1\n").expect("write");
    std::fs::write(disk.join("queue/scheduler"), "[none] mq-deadline\n").expect("write");
    let dev_block = sys.path().join("dev/block");
    std::fs::create_dir_all(&dev_block).expect("mkdir");
    std::os::unix::fs::symlink(&part, dev_block.join(format!("{major}:{minor}"))).expect("symlink");
    // A missing subdirectory resolves through its existing ancestor.
    let found = block_device_of(&data.path().join("not/yet"), &dev_block).expect("device");
    assert_eq!(found.name, "vdz");
    assert!(found.sysfs_dir.join("queue/scheduler").exists());
}

// glibc's dev_t encoding, to avoid a libc dev-dependency just for the test.
fn libc_major(dev: u64) -> u64 {
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff)
}
fn libc_minor(dev: u64) -> u64 {
    ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff)
}

#[test]
fn tiny_disk_probe_fills_every_cell() {
    // On the target dir's disk: /tmp may be a tmpfs without O_DIRECT.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let mut cfg = DiskProbeConfig::new(dir.path(), Duration::from_secs(1));
    cfg.file_bytes = 16 << 20;
    cfg.cell_bytes_max = 4 << 20;
    cfg.cell_ops_max = 2000;
    let report = probe_disk(&cfg).expect("disk probe");
    assert_eq!(
        report.cells.len(),
        2 * BLOCK_SIZES_BYTES.len() * QUEUE_DEPTHS.len()
    );
    for &bs in &BLOCK_SIZES_BYTES {
        for &qd in &QUEUE_DEPTHS {
            for kind in [IoKind::Write, IoKind::Read] {
                let c = report.cell(kind, bs, qd).expect("cell present");
                assert!(c.latency.ops >= qd as u64, "{c:?}");
                assert!(c.latency.p99_us >= c.latency.p50_us, "{c:?}");
            }
        }
    }
    assert!(report.fsync.fdatasync.ops >= 1);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "probe left files behind: {left:?}");
}

#[test]
fn write_pattern_verdict_follows_cells_with_same_bytes_in_flight() {
    let mut disk = fake_disk(80.0);
    for c in &mut disk.cells {
        // A device that saturates at 1000 MiB/s once 1 MiB is in flight.
        let in_flight = (c.block_bytes * c.depth) as f64;
        c.mib_per_sec = (in_flight / f64::from(1u32 << 20)).min(1.0) * 1000.0;
    }
    let lines = write_pattern_reasoning(&disk).join("\n");
    assert!(
        lines.contains("the figures support 256 KiB × 16"),
        "{lines}"
    );

    for c in &mut disk.cells {
        // Large writes collapse past 4 MiB in flight.
        if c.block_bytes == 1 << 20 && c.depth >= 16 {
            c.mib_per_sec = 300.0;
        }
    }
    let lines = write_pattern_reasoning(&disk).join("\n");
    assert!(lines.contains("1 MiB writes peak at depth"), "{lines}");
    assert!(lines.contains("fall to 300 MiB/s at depth 16"), "{lines}");
}
