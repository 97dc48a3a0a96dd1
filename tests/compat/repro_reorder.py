#!/usr/bin/env python3
"""Reproducer for the record-reorder bug with small segments (not a pytest test).

Starts target/debug/sluice with --smp 1 and log.segment.bytes=1 MiB, produces N records of
100 bytes whose value encodes their sequence number (linger.ms=5, acks=1, one partition),
consumes from offset 0 and compares value vs offset; then stops the broker and reads the
segment files directly (docs/storage-format.md) to tell a wrong stored log from a wrong read.

usage: repro_reorder.py [--records N] [--smp N] [--segment-bytes B] [--keep]
exit status 0: every offset holds its record (consumer and disk); 1: mismatches.
"""

import argparse
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "reorder"
VALUE_BYTES = 100


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def value_of(seq):
    return f"{seq:012d}".encode().ljust(VALUE_BYTES, b"x")


def seq_of(value):
    return int(value[:12])


def start_broker(data_dir, smp, segment_bytes, log_path):
    port, admin = free_port(), free_port()
    cmd = [str(ROOT / "target/debug/sluice"), "--listen", f"127.0.0.1:{port}",
           "--admin-listen", f"127.0.0.1:{admin}", "--data-dir", str(data_dir),
           "--smp", str(smp), "--set", f"log.segment.bytes={segment_bytes}"]
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"broker exited {proc.returncode}; see {log_path}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{admin}/health", timeout=2) as r:
                if r.status == 200:
                    return proc, f"127.0.0.1:{port}"
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    sys.exit("broker not ready")


def produce(bootstrap, n):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": 1,
                  "linger.ms": 5, "message.timeout.ms": 120000, "retries": 0,
                  "queue.buffering.max.messages": 2_000_000})
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    for seq in range(n):
        while True:
            try:
                p.produce(TOPIC, value_of(seq), partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        if seq % 10000 == 0:
            p.poll(0)
    left = p.flush(120)
    if left or errors:
        sys.exit(f"produce failed: {left} undelivered, errors {errors[:5]}")


def consume(bootstrap, n):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "enable.auto.commit": False, "auto.offset.reset": "error",
                  "enable.partition.eof": True})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = {}
    deadline = time.monotonic() + 300
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                sys.exit(f"consume error {m.error()}")
            got[m.offset()] = seq_of(m.value())
    c.close()
    return got


def varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), i


def read_disk(part_dir):
    """{offset: seq} from the .log files, plus the segment each batch lies in."""
    got, where = {}, {}
    for path in sorted(part_dir.glob("*.log")):
        data = path.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            if length == 0:
                break
            count = struct.unpack_from(">i", data, pos + 57)[0]
            attrs = struct.unpack_from(">h", data, pos + 21)[0]
            assert attrs & 7 == 0, "compressed batch"
            i = pos + 61
            for _ in range(count):
                rec_len, i = varint(data, i)
                j = i + 1  # attributes
                _, j = varint(data, j)  # timestamp delta
                off_delta, j = varint(data, j)
                klen, j = varint(data, j)
                j += max(klen, 0)
                vlen, j = varint(data, j)
                got[base + off_delta] = seq_of(data[j:j + vlen])
                where[base + off_delta] = (path.name, pos)
                i += rec_len
            pos += length + 12
    return got, where


def mismatches(got, n):
    return [(o, got.get(o)) for o in range(n) if got.get(o) != o]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_300_000)
    ap.add_argument("--smp", type=int, default=1)
    ap.add_argument("--segment-bytes", type=int, default=1 << 20)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sluice-reorder-"))
    data = tmp / "data"
    proc, bootstrap = start_broker(data, args.smp, args.segment_bytes, tmp / "broker.log")
    try:
        a = AdminClient({"bootstrap.servers": bootstrap})
        a.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        time.sleep(1)
        t0 = time.monotonic()
        produce(bootstrap, args.records)
        print(f"produced {args.records} in {time.monotonic() - t0:.1f} s")
        consumed = consume(bootstrap, args.records)
        print(f"consumed {len(consumed)}")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    bad_read = mismatches(consumed, args.records)
    part_dir = next(data.glob(f"{TOPIC}-0"))
    disk, where = read_disk(part_dir)
    bad_disk = mismatches(disk, args.records)
    print(f"segments: {len(list(part_dir.glob('*.log')))}")
    print(f"consumer: {len(bad_read)} offsets wrong; first: {bad_read[:5]}")
    print(f"disk:     {len(bad_disk)} offsets wrong; first: {bad_disk[:5]}")
    for o, _ in bad_disk[:1] + bad_read[:1]:
        print(f"  offset {o} is in {where.get(o)}")
    if args.keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp)
    return 1 if bad_read or bad_disk else 0


if __name__ == "__main__":
    sys.exit(main())
