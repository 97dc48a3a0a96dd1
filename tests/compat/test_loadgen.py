"""Smoke runs of `sluice-loadgen`: every scenario for a couple of seconds with small
parameters, against a `sluice` that loadgen starts itself (`--sluice-bin`) or the test's
broker (`--bootstrap`). They check message counts and well-formed output (JSON, HdrHistogram
log, SVG plot), never timings: benchmarks do not live in tests (DESIGN.md §7).

`SLUICE_LOADGEN_BIN=/path/to/sluice-loadgen` skips the cargo build.
"""

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

RUN_TIMEOUT_S = 180
# Figures every broker object of the JSON result carries (the schema, point 0).
REQUIRED_NUMBERS = ["p50_ms", "p99_ms", "p999_ms", "max_ms", "msgs_per_sec", "mb_per_sec",
                    "sent", "received"]


@pytest.fixture(scope="session")
def loadgen_bin():
    env_bin = os.environ.get("SLUICE_LOADGEN_BIN")
    if env_bin:
        return Path(env_bin).resolve()
    cmd = ["cargo", "build", "-p", "sluice-loadgen", "--message-format=json-render-diagnostics"]
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stderr[-6000:]}",
                    pytrace=False)
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") \
                and msg.get("target", {}).get("name") == "sluice-loadgen":
            return Path(msg["executable"])
    pytest.fail("cargo build produced no `sluice-loadgen` executable", pytrace=False)


def run_loadgen(loadgen_bin, tmp_path, *args):
    """Runs loadgen with its outputs in tmp_path; returns (parsed JSON, JSON path, stdout)."""
    json_path = tmp_path / "out" / "result.json"
    cmd = [str(loadgen_bin), *args, "--json", str(json_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          cwd=tmp_path)
    assert proc.returncode == 0, (
        f"command: {' '.join(cmd)}\nexit {proc.returncode}\n"
        f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}")
    assert json_path.is_file(), proc.stdout
    return json.loads(json_path.read_text()), json_path, proc.stdout


def local(sluice_bin, tmp_path, scenario, *args):
    return [scenario, "--sluice-bin", str(sluice_bin), "--data-parent", str(tmp_path),
            "--warmup", "0", *args]


def check_broker(b, groups=1):
    for key in REQUIRED_NUMBERS:
        assert isinstance(b[key], (int, float)) and math.isfinite(b[key]), (key, b[key])
    assert b["sent"] > 0, b
    # Every group got every acknowledged record (at least once); nothing failed.
    assert b["received"] >= b["sent"], b
    assert len(b["received_per_group"]) == groups, b
    assert all(r >= b["sent"] for r in b["received_per_group"]), b
    assert b["failed"] == 0, b
    assert b["latency_count"] > 0, b
    assert b["p50_ms"] <= b["p99_ms"] <= b["p999_ms"] <= b["max_ms"], b


def check_files(result, json_path):
    for b in result["brokers"]:
        hlog = Path(b["hdr_log"])
        assert hlog.parent == json_path.parent, hlog
        text = hlog.read_text()
        assert "#[StartTime:" in text, text[:500]
        # At least one interval line: start,length,max,base64 histogram.
        assert any(line[:1].isdigit() and line.count(",") == 3 for line in text.splitlines()), \
            text[:500]
    svg = json_path.with_suffix(".svg")
    assert svg.is_file()
    assert "<svg" in svg.read_text()


def test_latency_with_baselines_on_a_local_broker(loadgen_bin, sluice_bin, tmp_path):
    result, json_path, stdout = run_loadgen(
        loadgen_bin, tmp_path, *local(sluice_bin, tmp_path, "latency", "--duration", "2",
                                      "--rate", "2000"))
    assert result["schema"] == "sluice-loadgen/1"
    assert result["scenario"] == "latency"
    assert result["params"]["acks"] == "all" and result["params"]["linger_ms"] == 0
    (b,) = result["brokers"]
    check_broker(b)
    assert b["local"] is True
    assert b["rss_max_bytes"] > 0 and b["rss_end_bytes"] > 0
    base = result["baselines"]
    assert base["tcp"]["p50_us"] > 0 and base["tcp"]["samples"] > 0
    # The disk part needs O_DIRECT (not on tmpfs): then a note says why it is missing.
    assert base["disk"] is not None or base["notes"], base
    if base["disk"] is not None:
        assert base["disk"]["write_mb_per_sec"] > 0
        assert b["vs_baseline"]["mb_per_sec_vs_disk_write"] > 0
    assert b["vs_baseline"]["p99_vs_tcp_rtt_p99"] > 0
    assert "p99_ms" in stdout and "baselines" in stdout
    # The floor ran after the broker, on the broker's CPUs, with the same scenario.
    floor = result["floor"]
    check_broker(floor)
    assert floor["label"] == "floor" and floor["local"] is True
    assert floor["cpu"]["broker_us_per_record"] > 0
    assert b["vs_floor"]["broker_cpu_us_per_record"] > 0
    assert b["vs_floor"]["p99_ms"] > 0
    assert "floor (same run" in stdout and "CPU per record =" in stdout
    assert Path(floor["hdr_log"]).is_file()
    check_files(result, json_path)


@pytest.mark.parametrize("scenario, args, groups", [
    ("throughput", ["--duration", "2"], 1),
    ("fanout", ["--duration", "2", "--rate", "1000"], 4),
    # Consumers that assign() their partitions instead of joining their groups.
    ("fanout", ["--duration", "2", "--rate", "1000", "--assign", "--consumers", "2"], 4),
    # 300 of the scenario's 1,000 partitions: a debug broker takes ~10 ms per partition to
    # shut down, which would dominate a smoke run.
    pytest.param("partitions", ["--duration", "2", "--rate", "2000", "--partitions", "300"], 1,
                 marks=pytest.mark.long("about 15 s: 300 partitions opened and closed by a "
                                        "debug broker (the README command's 30-minute budget)")),
])
def test_scenario_on_a_local_broker(loadgen_bin, sluice_bin, tmp_path, scenario, args, groups):
    result, json_path, _ = run_loadgen(
        loadgen_bin, tmp_path, *local(sluice_bin, tmp_path, scenario, "--no-baselines", *args))
    assert result["baselines"] is None
    assert result["floor"] is None, "the floor runs with latency only"
    (b,) = result["brokers"]
    check_broker(b, groups=groups)
    if scenario == "partitions":
        assert b["partitions"] == 300
    check_files(result, json_path)


@pytest.mark.parametrize("records_per_txn", [
    pytest.param(1, marks=pytest.mark.long("one record per transaction: the 100-record case "
                                           "runs the same path (CI time)")),
    100])
def test_transactions_commit_and_are_read_committed(loadgen_bin, sluice_bin, tmp_path,
                                                     records_per_txn):
    result, json_path, stdout = run_loadgen(
        loadgen_bin, tmp_path, *local(sluice_bin, tmp_path, "transactions", "--no-baselines",
                                      "--duration", "2",
                                      "--records-per-txn", str(records_per_txn)))
    assert result["scenario"] == "transactions"
    p = result["params"]
    assert p["records_per_txn"] == records_per_txn and p["partitions"] == 3
    assert p["rate_per_sec"] is None and p["idempotence"] is True, p
    assert result["floor"] is None
    (b,) = result["brokers"]
    # Every record of every committed transaction reached the read_committed group.
    check_broker(b)
    t = b["transactions"]
    assert t["committed"] > 0, t
    assert t["aborted"] == 0, t
    assert b["sent"] == t["committed"] * records_per_txn, (b["sent"], t)
    assert t["txns_per_sec"] > 0 and b["msgs_per_sec"] > 0, t
    assert 0 < t["commit_p50_ms"] <= t["commit_p99_ms"] <= t["commit_max_ms"], t
    assert "txns_per_sec" in stdout and "read_committed" in stdout
    check_files(result, json_path)


def test_catchup_reads_the_whole_backlog(loadgen_bin, sluice_bin, tmp_path):
    result, json_path, _ = run_loadgen(
        loadgen_bin, tmp_path, *local(sluice_bin, tmp_path, "catchup", "--no-baselines",
                                      "--catchup-bytes", "2000000"))
    (b,) = result["brokers"]
    check_broker(b)
    # 2,000,000 bytes in 1 KiB records, rounded up.
    assert b["sent"] == b["received"] == 1954, b
    c = b["catchup"]
    assert c["produced_bytes"] == 1954 * 1024
    assert c["read_mb_per_sec"] > 0 and c["produce_mb_per_sec"] > 0
    check_files(result, json_path)


@pytest.mark.long("about 10 s of soak reports (the README command's 30-minute budget)")
def test_soak_prints_periodic_reports(loadgen_bin, sluice_bin, tmp_path):
    result, json_path, stdout = run_loadgen(
        loadgen_bin, tmp_path, *local(sluice_bin, tmp_path, "soak", "--no-baselines",
                                      "--soak-of", "fanout", "--duration", "3",
                                      "--report-every", "1", "--rate", "500"))
    assert result["scenario"] == "soak"
    assert result["params"]["scenario"] == "fanout" and result["params"]["soak"] is True
    (b,) = result["brokers"]
    check_broker(b, groups=4)
    assert len(b["intervals"]) >= 2, b["intervals"]
    for interval in b["intervals"]:
        assert interval["t_s"] > 0 and interval["msgs_per_sec"] >= 0
    assert stdout.count("msg/s  p50") >= 2, stdout
    check_files(result, json_path)


@pytest.mark.long("loadgen's bootstrap and compare modes against a running broker, about 15 s "
                  "(CI time)")
def test_bootstrap_and_compare_drive_an_external_broker(loadgen_bin, broker, tmp_path):
    # The same broker on both sides: exercises --bootstrap and --compare, not a comparison.
    result, json_path, stdout = run_loadgen(
        loadgen_bin, tmp_path, "latency", "--bootstrap", broker.bootstrap,
        "--compare", broker.bootstrap, "--duration", "2", "--warmup", "0", "--rate", "1000",
        "--no-baselines", "--no-floor", "--segment-bytes", str(16 << 20))
    assert len(result["brokers"]) == 2
    assert result["floor"] is None
    for b in result["brokers"]:
        check_broker(b)
        assert b["local"] is False
        assert b["rss_max_bytes"] is None
        assert b["vs_floor"] is None
    assert result["comparison"]["sent"] == pytest.approx(1.0, rel=0.2)
    assert "ratio" in stdout
    check_files(result, json_path)


def test_sweep_steps_up_until_a_rate_is_not_held(loadgen_bin, sluice_bin, tmp_path):
    # Tiny rates and steps: checks the shape of the result, never the knee (no benchmarks here).
    result, json_path, stdout = run_loadgen(
        loadgen_bin, tmp_path, *local(sluice_bin, tmp_path, "sweep", "--duration", "1",
                                      "--sweep-rates", "100,200", "--no-baselines",
                                      "--segment-bytes", str(16 << 20)))
    assert result["schema"] == "sluice-loadgen-sweep/1"
    assert result["scenario"] == "sweep" and result["rates"] == [100, 200]
    assert result["params"]["acks"] == "all" and result["params"]["linger_ms"] == 0
    (b,) = result["brokers"]
    assert 1 <= len(b["steps"]) <= 2, b["steps"]
    for step in b["steps"]:
        assert step["sent"] > 0 and step["complete"], step
        assert step["p50_ms"] <= step["p99_ms"] <= step["p9999_ms"] <= step["max_ms"], step
        assert step["broker_cpu_percent"] is not None and step["broker_cpu_percent"] >= 0, step
        assert Path(step["hdr_log"]).is_file()
    # Either every step held (knee = the last rate) or the sweep stopped at the first that
    # did not.
    held = [s["held"] for s in b["steps"]]
    assert held == [True] * len(held) or held[-1] is False, held
    assert "knee" in stdout and "achieved/s" in stdout
    svg = json_path.with_suffix(".svg")
    assert "<svg" in svg.read_text() and b["label"] in svg.read_text()


# A SASL_SSL listener with SCRAM beside the PLAINTEXT one (test_scram.py's settings).
SCRAM_SSL_SETTINGS = {
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "ssl.keystore.type": "PEM", "ssl.keystore.location": "{certs}/server.pem"}


def add_scram_user(bootstrap, user, password):
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, password.encode())])
    for future in futures.values():
        future.result(timeout=30)


def sasl_ssl_client_config(tls_certs):
    return ["--client-config", "security.protocol=SASL_SSL",
            "--client-config", f"ssl.ca.location={tls_certs['ca']}",
            "--client-config", "sasl.mechanism=SCRAM-SHA-256",
            "--client-config", "sasl.username=alice",
            "--client-config", "sasl.password=alice-secret"]


@pytest.mark.long("loadgen over SASL_SSL beside PLAINTEXT, about 12 s (CI time; SCRAM over TLS "
                  "with real clients stays in test_scram_tls_clients.py)")
@pytest.mark.sluice(listeners={"SASL_SSL": "SASL_SSL"}, settings=SCRAM_SSL_SETTINGS)
def test_latency_over_sasl_ssl_beside_plaintext(loadgen_bin, broker, tls_certs, tmp_path):
    # --client-config reaches every client of the broker under test (a wrong password would
    # fail the topic creation), --compare-client-config those of the compared one.
    add_scram_user(broker.bootstrap, "alice", "alice-secret")
    result, json_path, stdout = run_loadgen(
        loadgen_bin, tmp_path, "latency", "--bootstrap", broker.listener_bootstrap("SASL_SSL"),
        *sasl_ssl_client_config(tls_certs),
        "--compare", broker.bootstrap, "--compare-client-config", "security.protocol=PLAINTEXT",
        "--duration", "2", "--warmup", "0", "--rate", "500", "--no-baselines", "--no-floor",
        "--segment-bytes", str(16 << 20))
    assert [b["security_protocol"] for b in result["brokers"]] == ["SASL_SSL", "PLAINTEXT"]
    for b in result["brokers"]:
        check_broker(b)
    assert "SASL_SSL" in stdout and "alice-secret" not in json_path.read_text()
    check_files(result, json_path)


@pytest.mark.sluice(listeners={"SASL_SSL": "SASL_SSL"}, settings=SCRAM_SSL_SETTINGS)
def test_connect_counts_tls_handshakes(loadgen_bin, broker, tls_certs, tmp_path):
    result, _, stdout = run_loadgen(
        loadgen_bin, tmp_path, "connect", "--bootstrap", broker.listener_bootstrap("SASL_SSL"),
        *sasl_ssl_client_config(tls_certs), "--compare", broker.bootstrap,
        "--compare-client-config", "security.protocol=PLAINTEXT", "--connections", "20",
        "--bootstrap-pid", str(broker.proc.pid))
    assert result["scenario"] == "connect"
    tls, plain = result["brokers"]
    assert (tls["security_protocol"], plain["security_protocol"]) == ("SASL_SSL", "PLAINTEXT")
    for b in (tls, plain):
        assert b["connections"] == 20 and b["connections_per_sec"] > 0, b
    assert tls["broker_us_per_connection"] is not None and plain["broker_us_per_connection"] is None
    assert "conns/s" in stdout
