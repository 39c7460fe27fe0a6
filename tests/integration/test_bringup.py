"""The provider bring-up playbook gates a pipeline (non-zero exit, junit.xml), and the scheduled review
playbook writes an SLA review from the history store."""

from __future__ import annotations

import json
import subprocess

from tests.integration.simrun import BIN, REPO, REQUIRES_SIM, ansible_env, load_result_list, simulated_cluster

pytestmark = REQUIRES_SIM
TAGS = "audit.os.kernel,audit.os.root_filesystem"


def _playbook(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "ansible-playbook"), str(REPO / "playbooks" / name), *args],
                          capture_output=True, text=True, timeout=600, env=ansible_env(), cwd=REPO)


def test_bringup_gates_the_pipeline_and_the_review_reads_the_history(tmp_path):
    gated, passed = tmp_path / "gated", tmp_path / "passed"
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        common = ["-i", str(sim / "inventory.ini"), "--tags", TAGS, "-e", "clustereval_bringup_burnin_duration_s=0"]
        # An audit-only run is provisional: it cannot reach Platinum, so a pipeline asking for it stops.
        proc = _playbook("bringup.yml", *common, "-e", f"clustereval_out={gated}",
                         "-e", "clustereval_bringup_fail_on=never", "-e", "clustereval_bringup_min_tier=Platinum")
        assert proc.returncode == 2, proc.stdout[-3000:]
        assert "the gate failed: tier" in proc.stdout, proc.stdout[-3000:]
        assert "below the minimum Platinum" in proc.stdout, proc.stdout[-3000:]
        items = load_result_list(gated)
        assert {"audit.os.kernel", "audit.os.root_filesystem"} <= {r["check"] for r in items}
        assert not [r for r in items if r["check"].startswith("harness.")], "the gate was recorded as a harness fault"
        assert (gated / "junit.xml").is_file() and (gated / "report.html").is_file()

        proc = _playbook("bringup.yml", *common, "-e", f"clustereval_out={passed}",
                         "-e", "clustereval_bringup_fail_on=never")
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert json.loads((passed / "score.json").read_text())["tier"]

    store, reviews = tmp_path / "history.sqlite", tmp_path / "reviews"
    proc = _playbook("review.yml", "-e", "clustereval_review_cluster=sim", "-e", f"clustereval_history_db={store}",
                     "-e", f"clustereval_review_record={passed}", "-e", "clustereval_review_kind=acceptance",
                     "-e", f"clustereval_review_out={reviews}")
    assert proc.returncode in (0, 2), proc.stdout[-3000:]
    written = sorted(p.name for p in reviews.iterdir())
    assert [n.rsplit(".", 1)[1] for n in written] == ["json", "md"] and written[0].startswith("review-sim-acceptance-")
    review = json.loads((reviews / written[0]).read_text())
    assert review["cluster"] == "sim" and review["terms"], review
    if proc.returncode == 2:
        assert "the SLA is breached for sim" in proc.stdout, proc.stdout[-3000:]
