"""KafkaJS transactions (issue 28 point 4): tests/node/transactions.js, one scenario per test
against a fresh broker — a transactional commit, an abort and a commit read back by
read_committed and read_uncommitted consumers, and the consume-transform-produce loop with
the consumed offsets sent to each transaction (sendOffsets → TxnOffsetCommit). KafkaJS is
installed by `npm ci` into tests/node/node_modules on first use (pinned by
tests/node/package-lock.json). Each also runs against Apache Kafka 4.4
(SLUICE_COMPAT_TARGET=kafka)."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parents[2] / "tests" / "node"
GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="session")
def kafkajs():
    """tests/node with its dependencies installed."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is needed for the KafkaJS tests", pytrace=False)
    if not (NODE_DIR / "node_modules" / "kafkajs" / "package.json").exists():
        cmd = ["npm", "ci", "--no-audit", "--no-fund"]
        proc = subprocess.run(cmd, cwd=NODE_DIR, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=300)
        if proc.returncode != 0:
            pytest.fail(f"`{' '.join(cmd)}` in {NODE_DIR} failed:\n{proc.stdout[-6000:]}",
                        pytrace=False)
    return NODE_DIR


def run_scenario(broker, node_dir, name, topic):
    cmd = ["node", "transactions.js", name, broker.bootstrap, topic]
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=node_dir, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=150,
                              env=dict(os.environ, KAFKAJS_NO_PARTITIONER_WARNING="1"))
        code, out = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as e:
        code, out = None, (e.stdout or b"").decode("utf-8", "replace") + "\n=== killed (a hang)"
    if code != 0 or f"PASS {name}" not in out:
        pytest.fail(f"command: {' '.join(cmd)} (in {node_dir})\nexit: {code} after "
                    f"{time.monotonic() - started:.1f} s\noutput:\n{out[-12000:]}\n"
                    f"broker log:\n{broker.log_tail()}", pytrace=False)


def test_kafkajs_transactions_commit_and_abort(broker, kafkajs):
    run_scenario(broker, kafkajs, "commit-abort", "kafkajs-txn")


@pytest.mark.sluice(settings=GROUP_SETTINGS)
def test_kafkajs_consume_transform_produce_with_send_offsets(broker, kafkajs):
    run_scenario(broker, kafkajs, "consume-transform-produce", "kafkajs-ctp")
