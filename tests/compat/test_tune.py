"""`sluice tune` writes a config the broker starts with; `sluice tune --check` reports the host
settings that hurt latency (one line per check, never failing)."""

import subprocess

from conftest import free_port
from compat_util import wait_until

import kafka_wire as kw


def test_tune_writes_a_config_the_broker_accepts(sluice_bin, tmp_path):
    data = tmp_path / "data"
    out = tmp_path / "sluice.toml"
    tuned = subprocess.run(
        [str(sluice_bin), "tune", "--data-dir", str(data), "--out", str(out), "--budget-secs", "2"],
        capture_output=True, text=True, timeout=120,
    )
    assert tuned.returncode == 0, tuned.stderr
    text = out.read_text()
    assert '"sluice.cores"' in text
    assert "fdatasync" in text  # the measured figures are in the comments
    leftovers = [p.name for p in data.iterdir()] if data.exists() else []
    assert leftovers == [], "the probe removes its temp files"

    port, admin = free_port(), free_port()
    proc = subprocess.Popen(
        [str(sluice_bin), "--config", str(out), "--data-dir", str(data),
         "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
         "--set", "log.segment.bytes=67108864"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        def answers():
            try:
                s = kw.connect(f"127.0.0.1:{port}", timeout=2)
            except OSError:
                return False
            s.sendall(kw.api_versions_v0(1))
            return kw.read_frame(s)[:4] == (1).to_bytes(4, "big")
        wait_until(answers, 30, what="broker started with the tuned config")
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0, proc.stderr.read()


def test_tune_check_reports_each_setting(sluice_bin, tmp_path):
    checked = subprocess.run(
        [str(sluice_bin), "tune", "--check", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )
    assert checked.returncode == 0, checked.stderr
    lines = checked.stdout.splitlines()
    for name in ("memlock", "governor", "thp", "scheduler", "swap"):
        assert any(l.split(":")[0] in ("ok", "warn", "skip") and f" {name}:" in l for l in lines), checked.stdout
