"""The Go clients — franz-go (kgo, kadm), IBM/sarama, segmentio/kafka-go — against Sluice
(issue 17). tests/go is compiled once per session (`go test -c`); each Go test then runs
alone against a fresh broker (SLUICE_BOOTSTRAP), and its output is the failure report."""

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

GO_DIR = Path(__file__).resolve().parents[2] / "tests" / "go"
GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0}


# Go tests that need a secured listener; tests/compat/test_scram_tls_clients.py runs them.
SECURED_SOURCES = {"scram_tls_test.go"}


def go_tests():
    """Names of the Go tests for a plain broker, read from the sources (collection needs no Go
    toolchain)."""
    names = []
    for src in sorted(GO_DIR.glob("*_test.go")):
        if src.name in SECURED_SOURCES:
            continue
        names += re.findall(r"^func (Test\w+)\(t \*testing\.T\)", src.read_text(), re.M)
    return names


@pytest.fixture(scope="session")
def go_test_binary(tmp_path_factory):
    if shutil.which("go") is None:
        pytest.fail("go is needed for the Go-client tests", pytrace=False)
    out = tmp_path_factory.mktemp("go") / "compat.test"
    cmd = ["go", "test", "-c", "-o", str(out), "."]
    proc = subprocess.run(cmd, cwd=GO_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"`{' '.join(cmd)}` in {GO_DIR} failed:\n{proc.stdout[-6000:]}",
                    pytrace=False)
    return out


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.parametrize("name", go_tests())
def test_go_client(broker, go_test_binary, name):
    run_go_test(go_test_binary, name, {"SLUICE_BOOTSTRAP": broker.bootstrap})


def run_go_test(binary, name, env):
    """Runs Go test `name` alone with the extra environment `env`; fails unless it passed."""
    cmd = [str(binary), "-test.run", f"^{name}$", "-test.v", "-test.count=1",
           "-test.timeout=150s"]
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=GO_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=180, env=dict(os.environ, **env))
        code, out = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as e:
        code, out = None, (e.stdout or b"").decode("utf-8", "replace") + "\n=== killed (a hang)"
    shown_env = " ".join(f"{k}={v}" for k, v in env.items())
    report = (f"command: {shown_env} {' '.join(cmd)}\n"
              f"exit: {code} after {time.monotonic() - started:.1f} s\noutput:\n{out[-12000:]}")
    if code != 0 or f"--- PASS: {name}" not in out:
        pytest.fail(report, pytrace=False)
