"""The front-end mesh checks, judged once per cluster on what every node kept, built the way the role builds it:
catalogue probes made into one instance per peer (``probe_instances``) with their parameters, the records kept
under ``raw/<host>/`` by the judge and read back for the cluster (``kept_probes``). The iperf3 output is the
corpus capture with its rates edited; the ping and route output is what this host printed, addresses edited."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clustereval import checks, facts, rundir, series
from clustereval.checks import Context, probe_catalogue
from clustereval.results import problems
from tests.conftest import read_corpus
from tests.helpers import RUN, load_plugin

REPO = Path(__file__).resolve().parents[2]
GOOD = "iperf3-3.9-J-tcp-10s-omit3-retransmits-crlf.json"
FAILED = "iperf3-3.6-J-error-control-socket-closed-empty-intervals-crlf.json"
CHECKS = ["network.mesh.tcp_bandwidth", "network.mesh.tcp_asymmetry", "network.mesh.loss", "network.mesh.rtt",
          "network.mesh.pairs"]
VARIANT = {"streams": 4, "duration_s": 10}
# The levels these tests are written against, given as inventory overrides (what an operator would do) so the
# packaged figures in baselines/network.yml can be tuned without moving the tests; the references stay the data's.
PINNED = {
    "network.mesh.tcp_bandwidth": {"warn": "0.5x", "fail": "0.2x"},
    "network.mesh.tcp_bandwidth.peers": {"warn": "0.6x", "fail": "0.35x"},
    "network.mesh.tcp_asymmetry": {"warn": 0.7, "fail": 0.5},
    "network.mesh.rtt": {"warn": 1.0, "fail": 5.0},
    "network.mesh.loss": {"warn": 0.0, "fail": 2.0},
}


def _filters():
    return load_plugin("plugins/filter/engine.py", "clustereval_engine_filters_mesh")


FILTERS = _filters()


def iperf3_json(gbitps: float) -> str:
    """The corpus capture (iperf3 3.9 -J, one stream, 10 s) with every rate and byte count scaled to ``gbitps``."""
    doc = json.loads(read_corpus("iperf3", GOOD))
    scale = gbitps * 1e9 / doc["end"]["sum_received"]["bits_per_second"]
    blocks = [doc["end"]["sum_sent"], doc["end"]["sum_received"], *doc["end"]["streams"][0].values()]
    blocks += [block for item in doc["intervals"] for block in (item["sum"], *item["streams"])]
    for block in blocks:
        block["bits_per_second"] *= scale
        block["bytes"] = int(block["bytes"] * scale)
    return json.dumps(doc, indent="\t") + "\n"


def ping_text(address: str, transmitted: int = 20, received: int | None = None, avg: float = 0.039,
              time_ms: int = 3812) -> str:
    """``ping -n -q`` as iputils printed it on this host, for ``address``."""
    received = transmitted if received is None else received
    loss = (transmitted - received) * 100 / transmitted
    text = (f"PING {address} ({address}) 56(84) bytes of data.\n\n--- {address} ping statistics ---\n"
            f"{transmitted} packets transmitted, {received} received, {loss:g}% packet loss, time {time_ms}ms\n")
    if received:
        text += f"rtt min/avg/max/mdev = {avg * 0.9:.3f}/{avg:.3f}/{avg * 1.1:.3f}/0.002 ms\n"
    return text + ("\n" if not received else "")


def address(host: str) -> str:
    return f"10.0.0.{host[1:]}"


class Mesh:
    """Every ordered pair of ``hosts`` measured at ``rate`` Gbit/s and 0.039 ms, on links of ``link_mbps``
    (None: the kernel does not know); ``iperf3``/``ping`` replace one pair's record fields, None drops it."""

    def __init__(self, hosts: list[str], rate: float = 9.4, link_mbps: int | None = 10000):
        self.hosts, self.rate, self.link_mbps = hosts, rate, link_mbps
        self.iperf3: dict[tuple[str, str], dict[str, Any] | None] = {}
        self.ping: dict[tuple[str, str], dict[str, Any] | None] = {}
        catalogue = {p["name"]: p for p in probe_catalogue.for_phase(
            "performance", timeout=30, names={"network_route", "network_ping", "network_iperf3"})}
        self.templates = catalogue

    def records(self, host: str) -> dict[str, dict[str, Any]]:
        """What the judge collected on ``host`` over the role's steps (the probe runner's records)."""
        peers = [h for h in self.hosts if h != host]
        addresses = {h: address(h) for h in self.hosts}
        planned = [self.templates["network_route"]]
        planned += FILTERS.probe_instances(self.templates["network_ping"], peers, addresses, timeout=60)
        planned += FILTERS.probe_instances(self.templates["network_iperf3"], peers, addresses, timeout=40)
        ready = probe_catalogue.with_params(planned, {"destinations": [addresses[p] for p in peers], "count": 20,
                                                      "interval": 0.2, "deadline": 9, "port": 5201, "duration": 10,
                                                      "streams": 4})
        out = {}
        for probe in ready:
            record = {**probe, "rc": 0, "stderr": "", "timed_out": False, "missing": False, "truncated": False,
                      "duration_s": 1.0}
            peer = probe["name"].partition("@")[2]
            if probe["name"] == "network_route":
                speed = self.link_mbps if self.link_mbps is not None else -1
                record["stdout"] = "".join(
                    f"route {addresses[p]}: {addresses[p]} dev eth0 src {addresses[host]} uid 0 \\    cache \n"
                    f"speed eth0: {speed}\n" for p in peers)
            elif probe["probe"] == "network_ping":
                record["stdout"] = ping_text(addresses[peer])
                change = self.ping.get((host, peer), {})
                if change is None:
                    continue
                record.update(change)
            else:
                record["stdout"] = iperf3_json(self.rate)
                change = self.iperf3.get((host, peer), {})
                if change is None:
                    continue
                record.update(change)
            out[probe["name"]] = record
        return out

    def judge(self, run_dir: Path, check_ids: list[str] = CHECKS, overrides: dict[str, Any] | None = None,
              **options: Any) -> dict[str, list[dict[str, Any]]]:
        """Keep each host's records as the judge does, read them back for the cluster and judge ``check_ids``."""
        per_host = {}
        for host in self.hosts:
            rundir.keep_probe_outputs(str(run_dir), host, self.records(host))
            per_host[host] = facts.hardware({"gpu_models": ["NVIDIA H100 80GB HBM3"], "gpu_count": 8})
        host_probes = {h: rundir.kept_probes(str(run_dir), h, ["network_route", "network_ping@*", "network_iperf3@*"])
                       for h in self.hosts}
        out, items = {}, []
        for check_id in check_ids:
            ctx = Context(subject="_cluster", params=dict(VARIANT), host_facts=per_host, host_probes=host_probes,
                          options={"baseline_overrides": PINNED if overrides is None else overrides,
                                   "harness": "standalone", **options},
                          facts=facts.for_subject(per_host, "_cluster"))
            out[check_id] = checks.evaluate_many(check_id, ctx, RUN)
            for result in out[check_id]:
                assert problems(result) == [], result
                assert result["params"] == VARIANT
            items.extend(out[check_id])
        series.write_pending(run_dir, items)
        return out


def by_subject(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["subject"]: r for r in results}


def statuses(results: list[dict[str, Any]]) -> dict[str, str]:
    return {r["subject"]: r["status"] for r in results}


# ------------------------------------------------------------------------------------------------ healthy


def test_a_healthy_mesh_passes_every_pair_and_keeps_the_intervals(tmp_path):
    out = Mesh(["n1", "n2", "n3"]).judge(tmp_path, overrides={})  # the packaged figures
    bandwidth = by_subject(out["network.mesh.tcp_bandwidth"])
    assert set(bandwidth) == {"n1->n2", "n1->n3", "n2->n1", "n2->n3", "n3->n1", "n3->n2"}
    one = bandwidth["n1->n2"]
    assert one["status"] == "pass" and one["value"] == pytest.approx(9.4) and one["unit"] == "Gbit/s"
    assert one["expected"]["reference"] == 10.0 and one["expected"]["fail_min"] < one["expected"]["min"] < 9.4
    assert one["expected"]["matched"] == "link-rate" and one["evidence"]["link_gbps"] == 10.0
    assert one["expected"]["source"].startswith("baselines/network.yml#link-rate")
    assert one["evidence"]["peers"]["reference"] == pytest.approx(9.4) and one["evidence"]["streams"] == 1
    assert one["artifacts"] == ["raw/n1/network-iperf3-to-n2.txt", "raw/n1/network-route.txt"]
    assert all((tmp_path / path).exists() for path in one["artifacts"])
    [ref] = one["series"]
    assert ref["path"] == "series/_cluster/network-mesh-tcp.csv" and ref["rows"] == 13 and "start_s" in ref["columns"]
    rows = series.read(tmp_path, ref["path"])
    assert len(rows) == 6 * 13 and {(r["source"], r["destination"]) for r in rows} == {
        tuple(s.split("->")) for s in bandwidth}
    assert statuses(out["network.mesh.tcp_asymmetry"]) == {"n1+n2": "pass", "n1+n3": "pass", "n2+n3": "pass"}
    assert set(statuses(out["network.mesh.loss"]).values()) == {"pass"}
    rtt = by_subject(out["network.mesh.rtt"])["n3->n2"]
    assert rtt["status"] == "pass" and rtt["value"] == 0.039 and rtt["evidence"]["received"] == 20
    assert rtt["artifacts"] == ["raw/n3/network-ping-to-n2.txt"]
    [pairs] = out["network.mesh.pairs"]
    assert pairs["status"] == "pass" and pairs["value"] == 6 and pairs["subject"] == "_cluster"
    assert pairs["summary"].startswith("6 of 6 ordered pairs measured, none slow, lossy or asymmetric (median 9.4")


# ------------------------------------------------------------------------------------------------ findings


def test_a_slow_pair_fails_a_slower_one_warns_and_the_summary_names_them(tmp_path):
    mesh = Mesh(["n1", "n2", "n3"])
    mesh.iperf3[("n1", "n3")] = {"stdout": iperf3_json(1.5)}  # under 0.2x the 10 Gbit/s link
    mesh.iperf3[("n2", "n3")] = {"stdout": iperf3_json(5.2)}  # above half the link, under 0.6x its peers
    out = mesh.judge(tmp_path)
    bandwidth = by_subject(out["network.mesh.tcp_bandwidth"])
    assert statuses(out["network.mesh.tcp_bandwidth"]) == {"n1->n2": "pass", "n1->n3": "fail", "n2->n1": "pass",
                                                           "n2->n3": "warn", "n3->n1": "pass", "n3->n2": "pass"}
    slow = bandwidth["n1->n3"]["summary"]
    assert slow.startswith("n1 -> n3: 1.5 Gbit/s is below 2 Gbit/s (fact link_gbps=10.0, link-rate)")
    assert "below 3.29 Gbit/s (peers_median of 6 measurements, peers)" in slow
    warned = bandwidth["n2->n3"]["summary"]
    assert "below 5.64 Gbit/s (peers_median" in warned and "link-rate" not in warned
    asymmetry = by_subject(out["network.mesh.tcp_asymmetry"])
    assert statuses(out["network.mesh.tcp_asymmetry"]) == {"n1+n2": "pass", "n1+n3": "fail", "n2+n3": "warn"}
    assert asymmetry["n1+n3"]["evidence"]["slower"] == "n1 -> n3" and asymmetry["n1+n3"]["value"] == pytest.approx(
        1.5 / 9.4, abs=1e-3)
    assert "n2 <-> n3 is asymmetric: n2 -> n3 gets 55% of the other direction" in asymmetry["n2+n3"]["summary"]
    [pairs] = out["network.mesh.pairs"]
    assert pairs["status"] == "fail"
    assert pairs["evidence"]["flagged"] == {"bandwidth": ["n1->n3 (fail)", "n2->n3 (warn)"],
                                            "asymmetry": ["n1+n3 (fail)", "n2+n3 (warn)"]}
    assert pairs["summary"] == ("6 of 6 ordered pairs measured; bandwidth: n1->n3 (fail), n2->n3 (warn); "
                                "asymmetry: n1+n3 (fail), n2+n3 (warn)")


def test_loss_and_round_trip_per_pair(tmp_path):
    mesh = Mesh(["n1", "n2", "n3"])
    mesh.ping[("n1", "n2")] = {"stdout": ping_text(address("n2"), 20, 19), "rc": 1}  # 5% loss
    mesh.ping[("n2", "n1")] = {"stdout": ping_text(address("n1"), 100, 99)}  # 1%
    mesh.ping[("n3", "n1")] = {"stdout": ping_text(address("n1"), avg=1.5)}
    mesh.ping[("n3", "n2")] = {"stdout": ping_text(address("n2"), avg=6.2)}
    mesh.ping[("n2", "n3")] = {"stdout": ping_text(address("n3"), 10, 0, time_ms=1840), "rc": 1}  # nothing back
    mesh.ping[("n1", "n3")] = {"stdout": "", "stderr": "ping: 10.0.0.3: Name or service not known\n", "rc": 2}
    out = mesh.judge(tmp_path, ["network.mesh.loss", "network.mesh.rtt", "network.mesh.pairs"])
    assert statuses(out["network.mesh.loss"]) == {"n1->n2": "fail", "n2->n1": "warn", "n3->n1": "pass",
                                                  "n3->n2": "pass", "n2->n3": "fail", "n1->n3": "fail"}
    assert statuses(out["network.mesh.rtt"]) == {"n1->n2": "pass", "n2->n1": "pass", "n3->n1": "warn",
                                                 "n3->n2": "fail", "n2->n3": "fail", "n1->n3": "fail"}
    loss, rtt = by_subject(out["network.mesh.loss"]), by_subject(out["network.mesh.rtt"])
    assert loss["n1->n2"]["value"] == 5.0 and "loss 5 % is above 2 %" in loss["n1->n2"]["summary"]
    assert loss["n2->n1"]["value"] == 1.0 and loss["n2->n3"]["value"] == 100.0
    assert rtt["n2->n3"]["summary"] == "n2 -> n3: no reply to 10 pings"
    assert rtt["n3->n2"]["value"] == 6.2 and "round-trip 6.2 ms is above 5 ms" in rtt["n3->n2"]["summary"]
    unresolved = loss["n1->n3"]["summary"]
    assert unresolved == "n1 could not ping n3: exit status 2: ping: 10.0.0.3: Name or service not known"
    assert loss["n1->n3"]["artifacts"] == ["raw/n1/network-ping-to-n3.txt"]
    [pairs] = out["network.mesh.pairs"]
    assert pairs["status"] == "fail" and set(pairs["evidence"]["flagged"]) == {"loss", "rtt"}


# ------------------------------------------------------------------------------------------------ harness trouble


def test_a_pair_whose_iperf3_failed_or_hung_fails_by_name(tmp_path):
    mesh = Mesh(["n1", "n2", "n3"])
    mesh.iperf3[("n2", "n1")] = {"stdout": read_corpus("iperf3", FAILED), "rc": 1,
                                 "stderr": "iperf3: error - control socket has closed unexpectedly\n"}
    mesh.iperf3[("n3", "n1")] = {"stdout": '{\n\t"start":\t{\n', "timed_out": True, "rc": -9}
    out = mesh.judge(tmp_path)
    bandwidth = by_subject(out["network.mesh.tcp_bandwidth"])
    failed, hung = bandwidth["n2->n1"], bandwidth["n3->n1"]
    assert failed["status"] == "fail" and failed["evidence"]["rc"] == 1 and failed["value"] is None
    assert failed["summary"] == ("no TCP bandwidth from n2 to n1: iperf3: error - control socket has closed "
                                 "unexpectedly")
    assert failed["artifacts"] == ["raw/n2/network-iperf3-to-n1.txt", "raw/n2/network-route.txt"]
    assert hung["status"] == "fail" and "did not finish within 40.0 s" in hung["summary"]
    # the pairs still measured are judged against the peers that were
    assert bandwidth["n1->n2"]["status"] == "pass" and bandwidth["n1->n2"]["evidence"]["peers"]["reference"] == 9.4
    # a pair measured one way only has no asymmetry to judge
    assert statuses(out["network.mesh.tcp_asymmetry"]) == {"n2+n3": "pass"}
    [pairs] = out["network.mesh.pairs"]
    assert pairs["status"] == "fail" and pairs["evidence"]["flagged"]["bandwidth"] == ["n2->n1 (fail)",
                                                                                       "n3->n1 (fail)"]


def test_a_ping_that_timed_out_is_the_harness_error_and_the_mesh_names_it(tmp_path):
    # ping -w bounds its own run: a ping killed at the probe's timeout is the harness's failure (the catalogue's
    # on_timeout is the default, error), unlike a hung iperf3 (on_timeout: fail)
    mesh = Mesh(["n1", "n2", "n3"])
    mesh.ping[("n1", "n3")] = {"stdout": "PING 10.0.0.3 (10.0.0.3) 56(84) bytes of data.\n", "timed_out": True,
                               "rc": -9}
    out = mesh.judge(tmp_path, ["network.mesh.loss", "network.mesh.rtt", "network.mesh.pairs"])
    for check_id in ("network.mesh.loss", "network.mesh.rtt"):
        timed_out = by_subject(out[check_id])["n1->n3"]
        assert timed_out["status"] == "error" and "did not finish within 60.0 s" in timed_out["summary"], check_id
        assert {s for p, s in statuses(out[check_id]).items() if p != "n1->n3"} == {"pass"}
    [pairs] = out["network.mesh.pairs"]
    assert pairs["status"] == "error"
    assert pairs["summary"] == "6 of 6 ordered pairs measured; loss: n1->n3 (error); rtt: n1->n3 (error)"


def test_a_pair_not_measured_is_named_and_an_unknown_link_is_judged_on_its_peers(tmp_path):
    mesh = Mesh(["n1", "n2", "n3"], link_mbps=None)  # virtual NICs: /sys/class/net/eth0/speed says -1
    mesh.iperf3[("n3", "n1")] = None  # the step never ran
    out = mesh.judge(tmp_path)
    bandwidth = by_subject(out["network.mesh.tcp_bandwidth"])
    assert set(bandwidth) == {"n1->n2", "n1->n3", "n2->n1", "n2->n3", "n3->n2"}
    one = bandwidth["n1->n2"]
    assert one["status"] == "pass" and one["evidence"]["link_gbps"] is None
    assert "no reference in baselines/network.yml" in one["evidence"]["no_absolute_reference"]
    assert one["expected"]["matched"] == "peers"
    [pairs] = out["network.mesh.pairs"]
    assert pairs["status"] == "warn" and pairs["evidence"]["not_measured"] == ["n3->n1"]
    assert pairs["summary"] == "5 of 6 ordered pairs measured; not measured: n3->n1"


def test_skips_say_why(tmp_path):
    mesh = Mesh(["n1", "n2"], link_mbps=None)
    mesh.iperf3[("n2", "n1")] = {"stdout": read_corpus("iperf3", FAILED), "rc": 1}
    out = mesh.judge(tmp_path)
    alone = by_subject(out["network.mesh.tcp_bandwidth"])["n1->n2"]
    assert alone["status"] == "skip" and "no reference for this link" in alone["summary"]
    assert "too few peers to compare with" in alone["summary"] and alone["value"] == pytest.approx(9.4)
    assert out["network.mesh.tcp_asymmetry"][0]["status"] == "skip"
    assert out["network.mesh.tcp_asymmetry"][0]["summary"] == "no pair was measured in both directions"
    empty = Mesh(["n1"]).judge(tmp_path / "single")
    assert {c: [r["status"] for r in rs] for c, rs in empty.items()} == {key: ["skip"] for key in CHECKS}
    assert empty["network.mesh.tcp_bandwidth"][0]["summary"].startswith("no node measured TCP bandwidth")
    assert empty["network.mesh.loss"][0]["summary"] == "no node measured its peers with ping"
    assert empty["network.mesh.pairs"][0]["summary"] == "a mesh needs two or more nodes; 1 measured"


def test_a_broken_setting_is_the_harness_error_never_the_clusters(tmp_path):
    out = Mesh(["n1", "n2"]).judge(tmp_path, ["network.mesh.rtt"],
                                   overrides={"network.mesh.rtt": {"direction": "sideways"}})
    [result] = out["network.mesh.rtt"]
    assert result["status"] == "error" and "direction must be 'higher' or 'lower'" in result["summary"]
