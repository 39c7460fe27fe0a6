"""The orchestration role's Slurm churn end to end on a simulated cluster of two nodes (real slurmctld and slurmd,
``--tags orchestration.slurm``, reliability phase): ten trivial jobs from the first node in a loop of sbatch, the
same work as a job array, a failed job requeued; every check judged, the per-job series written, and nothing the
run submitted left in the queue. A run selecting none of the checks, or told the harness is Kubernetes, submits
nothing (the latter records every check as a skip saying so).

Needs root and Debian's slurm-wlm, munge and openssh-server (``make install``).
"""

from __future__ import annotations

import json

from tests.integration.simrun import REQUIRES_SIM, load_result_list, read_inventory, run_playbook, simulated_cluster
from tests.integration.simrun import ssh as node_ssh

pytestmark = REQUIRES_SIM

CHECKS = {"orchestration.slurm.submit_rate", "orchestration.slurm.start_latency", "orchestration.slurm.array",
          "orchestration.slurm.requeue"}


def test_slurm_churn_on_two_simulated_nodes(tmp_path):
    sim, run_dir, idle_dir, k8s_dir = tmp_path / "sim", tmp_path / "run", tmp_path / "idle", tmp_path / "k8s"
    with simulated_cluster(sim, 2, "reference"):
        inventory = sim / "inventory.ini"
        hosts, _ = read_inventory(sim)
        # Nothing selected: nothing submitted (select before run).
        proc = run_playbook(inventory, "-e", "clustereval_phases=reliability", "--tags", "orchestration.none",
                            "-e", f"clustereval_out={idle_dir}", timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert not list(idle_dir.glob("raw/*/orchestration-slurm.txt"))
        # Told the harness is Kubernetes: nothing submitted, every check a skip saying so.
        proc = run_playbook(inventory, "-e", "clustereval_phases=reliability", "--tags", "orchestration.slurm",
                            "-e", "clustereval_harness=k8s", "-e", f"clustereval_out={k8s_dir}", timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        skipped = [r for r in load_result_list(k8s_dir) if r["check"] in CHECKS]
        assert {r["status"] for r in skipped} == {"skip"} and len(skipped) == 4
        assert all("k8s" in r["summary"] for r in skipped)
        assert not list(k8s_dir.glob("raw/*/orchestration-slurm.txt"))
        proc = run_playbook(inventory, "-e", "clustereval_phases=reliability", "--tags", "orchestration.slurm",
                            "-e", f"clustereval_out={run_dir}", timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        # Nothing queued or running; what the controller still remembers of the run's jobs is finished.
        queue = node_ssh(sim, hosts["node1"], "squeue -h -o %i; scontrol show job -o | grep clustereval-orch"
                                              " | grep -Ev 'JobState=(COMPLETED|CANCELLED|FAILED) '")
        assert queue.returncode in (0, 1) and not queue.stdout.strip(), queue.stdout
    results = [r for r in load_result_list(run_dir) if r["check"] in CHECKS]
    assert {r["check"] for r in results} == CHECKS
    assert all(r["subject"] == "node1" for r in results)  # the submit host only
    by = {(r["check"], (r.get("params") or {}).get("stat")): r for r in results}
    # A loaded 2-core machine may make a figure slow, never wrong: nothing errs or skips, the requeue works.
    assert {r["status"] for r in results} <= {"pass", "warn"}, [(r["check"], r["summary"]) for r in results]
    assert by["orchestration.slurm.requeue", None]["status"] == "pass"
    assert by["orchestration.slurm.requeue", None]["evidence"]["restarts"] == 1
    assert by["orchestration.slurm.submit_rate", None]["evidence"]["jobs"] == 10
    series = run_dir / "series" / "node1" / "orchestration-slurm-jobs.csv"
    assert len(series.read_text().splitlines()) == 1 + 20  # header, ten jobs and ten array tasks
    raw = (run_dir / "raw" / "node1" / "orchestration-slurm.txt").read_text()
    assert raw.rstrip().endswith("end state=ok"), raw[-500:]
    assert json.loads((run_dir / "raw" / "node1" / "orchestration-slurm.txt.meta.json").read_text())
