"""Start-up checks a newcomer meets first: the data-dir lock, config errors that name the key,
and `auto.create.topics.enable`."""

import subprocess
import time

import pytest

import kafka_wire as kw
from conftest import free_port


def run_sluice(binary, *args, timeout=30):
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout)


def test_a_second_broker_on_the_same_data_dir_refuses_to_start(broker, sluice_bin):
    second = run_sluice(
        sluice_bin,
        "--listen", f"127.0.0.1:{free_port()}",
        "--admin-listen", f"127.0.0.1:{free_port()}",
        "--data-dir", str(broker.data_dir),
        "--smp", "1",
    )
    assert second.returncode != 0
    assert "in use" in second.stderr, second.stderr
    # The first broker still serves.
    sock = kw.connect(broker.bootstrap)
    sock.sendall(kw.api_versions_v0(3))
    assert kw.read_frame(sock)[:4] == (3).to_bytes(4, "big")


@pytest.mark.parametrize(
    "setting, named",
    [
        ("log.retension.ms=1000", "log.retention.ms"),  # unknown key: closest known one named
        ("num.partitions=many", "num.partitions"),  # wrong type
        ("segment.bytes=5", "segment.bytes"),  # out of range (Kafka's minimum is 14)
        ("cleanup.policy=compacted", "cleanup.policy"),  # not a policy
    ],
)
def test_bad_config_fails_at_start_naming_the_key(sluice_bin, tmp_path, setting, named):
    result = run_sluice(
        sluice_bin,
        "--listen", f"127.0.0.1:{free_port()}",
        "--admin-listen", f"127.0.0.1:{free_port()}",
        "--data-dir", str(tmp_path / "data"),
        "--set", setting,
    )
    assert result.returncode != 0
    assert named in result.stderr, result.stderr


def test_bad_config_file_fails_at_start_naming_the_key(sluice_bin, tmp_path):
    config = tmp_path / "sluice.toml"
    config.write_text('"auto.create.topics.enable" = "perhaps"\n')
    result = run_sluice(
        sluice_bin,
        "--listen", f"127.0.0.1:{free_port()}",
        "--admin-listen", f"127.0.0.1:{free_port()}",
        "--data-dir", str(tmp_path / "data"),
        "--config", str(config),
    )
    assert result.returncode != 0
    assert "auto.create.topics.enable" in result.stderr, result.stderr


@pytest.mark.sluice(settings={"auto.create.topics.enable": False})
def test_auto_create_off_leaves_unknown_topics_unknown(broker):
    sock = kw.connect(broker.bootstrap)
    sock.sendall(kw.metadata_v1(11, ["never-created"]))
    corr, _, _, topics = kw.parse_metadata_v1(kw.read_frame(sock))
    assert corr == 11
    error, partitions = topics["never-created"]
    assert error == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert partitions == {}


@pytest.mark.sluice(settings={"num.partitions": 3})
def test_auto_create_on_uses_num_partitions(broker):
    sock = kw.connect(broker.bootstrap)
    # Kafka answers the request that triggers the creation with UNKNOWN_TOPIC_OR_PARTITION (3)
    # or LEADER_NOT_AVAILABLE (5) until the topic exists; clients ask again.
    deadline = time.monotonic() + 30
    for corr in range(12, 1000):
        sock.sendall(kw.metadata_v1(corr, ["made-on-demand"]))
        _, _, _, topics = kw.parse_metadata_v1(kw.read_frame(sock))
        error, partitions = topics["made-on-demand"]
        if error not in (3, 5) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert error == 0
    assert sorted(partitions) == [0, 1, 2]
