"""The front-end mesh under load (checks/burnin_frontend.py): the network mesh's records as the burnin role keeps
them (``burnin_frontend_*`` names, the network probes underneath), judged with the network mesh's limits. The
records are built by tests/unit/test_network_mesh.py's ``Mesh`` (the corpus iperf3 capture, ping as iputils
printed it) and renamed the way roles/burnin/vars/main.yml renames them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clustereval import checks, facts, rundir
from clustereval.checks import Context
from clustereval.results import problems
from tests.helpers import RUN
from tests.unit.test_network_mesh import PINNED, Mesh, by_subject, iperf3_json, ping_text, statuses

CHECKS = ["burnin.frontend.loss", "burnin.frontend.rtt", "burnin.frontend.bandwidth"]
VARIANT = {"load": "burnin", "streams": 4, "duration_s": 10}
KEPT = ["burnin_frontend_route", "burnin_frontend_ping@*", "burnin_frontend_iperf3@*"]
NAMES = {"network_route": "burnin_frontend_route", "network_ping": "burnin_frontend_ping",
         "network_iperf3": "burnin_frontend_iperf3"}


class LoadedMesh(Mesh):
    """The same mesh kept under the burnin role's names (``probe`` stays the network one, as the role sets it)."""

    def records(self, host: str) -> dict[str, dict[str, Any]]:
        out = {}
        for name, record in super().records(host).items():
            base, at, peer = name.partition("@")
            new = NAMES[base] + at + peer
            artifact = NAMES[base].replace("_", "-") + (f"-to-{peer}" if peer else "") + ".txt"
            out[new] = {**record, "name": new, "probe": base, "artifact": artifact}
        return out

    def judge_loaded(self, run_dir: Path, overrides: dict[str, Any] | None = None,
                     idle: bool = False, load: str | None = None) -> dict[str, list[dict[str, Any]]]:
        per_host = {}
        for host in self.hosts:
            rundir.keep_probe_outputs(str(run_dir), host, self.records(host))
            if idle:  # an idle mesh of the same run at 9.4 Gbit/s: it must not be what is judged
                rundir.keep_probe_outputs(str(run_dir), host, Mesh(self.hosts).records(host))
            per_host[host] = facts.hardware({"gpu_models": ["NVIDIA H100 80GB HBM3"], "gpu_count": 8})
        host_probes = {h: rundir.kept_probes(str(run_dir), h, KEPT) for h in self.hosts}
        out = {}
        for check_id in CHECKS:
            ctx = Context(subject="_cluster", params=dict(VARIANT), host_facts=per_host, host_probes=host_probes,
                          options={"baseline_overrides": PINNED if overrides is None else overrides,
                                   "harness": "standalone", **({"burnin_load": load} if load else {})},
                          facts=facts.for_subject(per_host, "_cluster"))
            out[check_id] = checks.evaluate_many(check_id, ctx, RUN)
            for result in out[check_id]:
                assert problems(result) == [], result
                assert result["params"] == VARIANT
        return out


def test_a_healthy_mesh_under_load_passes_every_pair_and_says_it_was_loaded(tmp_path):
    out = LoadedMesh(["n1", "n2", "n3"]).judge_loaded(tmp_path, overrides={})  # the packaged figures
    pairs = {"n1->n2", "n1->n3", "n2->n1", "n2->n3", "n3->n1", "n3->n2"}
    for check_id in CHECKS:
        assert statuses(out[check_id]) == dict.fromkeys(pairs, "pass"), check_id
        for result in out[check_id]:
            assert result["summary"].startswith("under load: ") and result["evidence"]["load"] == "burnin"
    one = by_subject(out["burnin.frontend.bandwidth"])["n1->n2"]
    assert one["value"] == 9.4 and one["expected"]["matched"] == "link-rate"  # the network role's baseline
    assert one["artifacts"] == ["raw/n1/burnin-frontend-iperf3-to-n2.txt", "raw/n1/burnin-frontend-route.txt"]
    assert one["series"][0]["path"] == "series/_cluster/burnin-frontend-tcp.csv"
    assert by_subject(out["burnin.frontend.rtt"])["n3->n2"]["value"] == 0.039


def test_a_partial_load_warns_at_best_and_names_the_part_that_ran(tmp_path):
    # clustereval_burnin_load=gpu: only the GEMMs ran beside the mesh; a healthy pair is not a pass under load
    out = LoadedMesh(["n1", "n2"]).judge_loaded(tmp_path, overrides={}, load="gpu")
    for check_id in CHECKS:
        assert set(statuses(out[check_id]).values()) == {"warn"}, check_id
        for result in out[check_id]:
            assert result["summary"].endswith("(only the burn-in's GEMMs on every node ran: "
                                              "clustereval_burnin_load=gpu)"), result["summary"]
            assert result["evidence"]["under"] == "the burn-in's GEMMs on every node"


def test_the_loaded_records_are_judged_not_the_idle_mesh_of_the_same_run(tmp_path):
    mesh = LoadedMesh(["n1", "n2"], rate=1.0)  # 1 Gbit/s on a 10 Gbit/s link under load
    out = mesh.judge_loaded(tmp_path, idle=True)
    assert statuses(out["burnin.frontend.bandwidth"]) == {"n1->n2": "fail", "n2->n1": "fail"}
    assert (tmp_path / "raw/n1/network-iperf3-to-n2.txt").exists()  # the idle mesh's record is still there


def test_loss_rtt_and_bandwidth_warn_and_fail_by_pair(tmp_path):
    mesh = LoadedMesh(["n1", "n2", "n3"])
    mesh.ping[("n1", "n2")] = {"stdout": ping_text("10.0.0.2", received=19)}  # 5 %: over the 2 % fail
    mesh.ping[("n2", "n3")] = {"stdout": ping_text("10.0.0.3", avg=2.5)}  # over 1 ms: warn
    mesh.ping[("n3", "n1")] = {"stdout": ping_text("10.0.0.1", avg=7.0)}  # over 5 ms: fail
    mesh.iperf3[("n1", "n3")] = {"stdout": iperf3_json(1.5)}  # under 0.2x the 10 Gbit/s link
    mesh.iperf3[("n2", "n3")] = {"stdout": iperf3_json(5.2)}  # under 0.6x its peers
    out = mesh.judge_loaded(tmp_path)
    loss = by_subject(out["burnin.frontend.loss"])
    assert loss["n1->n2"]["status"] == "fail" and loss["n1->n2"]["summary"].startswith("under load: n1 -> n2: loss")
    rtt = statuses(out["burnin.frontend.rtt"])
    assert rtt["n2->n3"] == "warn" and rtt["n3->n1"] == "fail" and rtt["n1->n2"] == "pass"
    bandwidth = statuses(out["burnin.frontend.bandwidth"])
    assert bandwidth["n1->n3"] == "fail" and bandwidth["n2->n3"] == "warn" and bandwidth["n1->n2"] == "pass"


def test_a_ping_that_timed_out_is_an_error_and_a_hung_iperf3_fails(tmp_path):
    mesh = LoadedMesh(["n1", "n2"])
    mesh.ping[("n1", "n2")] = {"stdout": "PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n", "timed_out": True,
                               "rc": -9}
    mesh.iperf3[("n2", "n1")] = {"stdout": '{\n\t"start":\t{\n', "timed_out": True, "rc": -9}
    out = mesh.judge_loaded(tmp_path)
    for check_id in ("burnin.frontend.loss", "burnin.frontend.rtt"):
        err = by_subject(out[check_id])["n1->n2"]
        assert err["status"] == "error" and "did not finish within" in err["summary"], check_id
    hung = by_subject(out["burnin.frontend.bandwidth"])["n2->n1"]
    assert hung["status"] == "fail" and hung["summary"].startswith("under load: no TCP bandwidth from n2 to n1")


def test_skips_say_why_and_that_it_was_under_load(tmp_path):
    out = {}
    for check_id in CHECKS:
        ctx = Context(subject="_cluster", params=dict(VARIANT), host_probes={"n1": {}},
                      options={"baseline_overrides": {}, "harness": "standalone"})
        [out[check_id]] = checks.evaluate_many(check_id, ctx, RUN)
    for check_id, result in out.items():
        assert result["status"] == "skip" and result["summary"].startswith("under load: "), check_id
    assert "ping" in out["burnin.frontend.loss"]["summary"]
    assert "TCP bandwidth" in out["burnin.frontend.bandwidth"]["summary"]


def test_a_broken_limit_is_the_harness_error_never_the_clusters(tmp_path):
    out = LoadedMesh(["n1", "n2"]).judge_loaded(tmp_path, overrides={"network.mesh.rtt": {"direction": "sideways"}})
    [result] = out["burnin.frontend.rtt"]
    assert result["status"] == "error" and "direction must be 'higher' or 'lower'" in result["summary"]
