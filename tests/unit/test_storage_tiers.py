"""Storage tiers: the tier probe's output parsed (fio JSON inside, as fio 3.x prints it) and every tier check's
statuses — pass, warn, fail, skip and error — on matrices built to show each finding."""

from __future__ import annotations

import json

import pytest

from clustereval import checks, parsers
from clustereval.checks import storage_tiers
from tests.helpers import PROBLEM_WORDS

PROBE = storage_tiers.PROBE
JOBS = ["seq_write_1m_direct", "seq_read_1m_direct", "seq_write_1m_buffered", "seq_read_1m_buffered",
        "rand_write_4k_buffered", "rand_read_4k_buffered", "rand_write_64k_direct", "rand_read_64k_direct"]


def fio_side(mbps: float, p99_ms: float) -> dict:
    kib = mbps / 1.048576 * 1024
    return {"io_bytes": int(kib * 1024), "bw": kib, "iops": kib / 1024, "runtime": 1000, "total_ios": 10,
            "clat_ns": {"mean": p99_ms * 5e5, "percentile": {"50.000000": p99_ms * 3e5, "90.000000": p99_ms * 6e5,
                                                             "99.000000": p99_ms * 1e6, "99.900000": p99_ms * 2e6}},
            "lat_ns": {"mean": p99_ms * 5e5}}


def fio_job(name: str, mbps: float, p99_ms: float, error: int = 0) -> dict:
    idle = {"io_bytes": 0, "bw": 0, "iops": 0, "runtime": 0, "total_ios": 0, "clat_ns": {"mean": 0},
            "lat_ns": {"mean": 0}}
    direction = "write" if "write" in name else "read"
    return {"jobname": name, "error": error, "read": idle, "write": idle, "trim": idle,
            direction: fio_side(mbps, p99_ms)}


def tier_text(name: str, path: str, mount: str, jobs: list[dict], fio_exit: int = 0) -> str:
    return (f"=== tier {name} {path}\nmount: {mount}\n" + json.dumps({"fio version": "fio-3.33", "jobs": jobs})
            + f"\nfio-exit: {fio_exit}\n")


def healthy_jobs(clients=(1, 2, 4)) -> list[dict]:
    return [fio_job(f"{job}.c{c}", 2000.0 * (1 + 0.1 * c), 5.0) for c in clients for job in JOBS]


NVME = "/scratch /dev/nvme0n1p1 xfs 3840000000000 3000000000000\ndisk: nvme0n1 nvme 0 disk"
NFS = "/home 10.0.0.5:/export/home nfs4 100000000000000 50000000000000"


def judge(check_id: str, text: str, options: dict | None = None) -> list[checks.Verdict]:
    ctx = checks.Context(subject="node1", probes={PROBE: {"name": PROBE, "rc": 0, "stdout": text,
                                                          "parser": "probe-storage-tiers"}},
                         options=options or {})
    outcome = checks.run_check(check_id, checks.registered()[check_id], ctx)
    verdicts = outcome if isinstance(outcome, list) else [outcome]
    for verdict in verdicts:
        assert not (verdict.status == "pass" and PROBLEM_WORDS.search(verdict.summary)), verdict.summary
    return verdicts


def by_tier(verdicts: list[checks.Verdict], **params) -> checks.Verdict:
    return next(v for v in verdicts if all((v.params or {}).get(k) == val for k, val in params.items()))


def test_the_probe_output_is_read_tier_by_tier():
    text = (tier_text("scratch", "/scratch", NVME, healthy_jobs((1,)))
            + "=== tier home /root\nsame-filesystem: /\n=== tier data /data\nmissing: no such directory\n"
            + "=== tier shm /dev/shm\nmount: /dev/shm tmpfs tmpfs 100 100\n{\"jobs\": [")
    tiers = {t["name"]: t for t in parsers.parse("probe-storage-tiers", text)["tiers"]}
    scratch = tiers["scratch"]
    assert (scratch["state"], scratch["kind"], scratch["fstype"]) == ("measured", "nvme", "xfs")
    assert scratch["shared"] is False
    assert len(scratch["points"]) == 8 and scratch["points"][0]["clients"] == 1
    assert scratch["points"][0]["clat_p99_us"] == pytest.approx(5000.0)
    assert tiers["home"]["state"] == "same_filesystem" and tiers["data"]["state"] == "missing"
    assert tiers["shm"]["state"] == "truncated" and "ends before fio did" in tiers["shm"]["reason"]
    with pytest.raises(parsers.ParseError):
        parsers.parse("probe-storage-tiers", "fio: command not found\n")


def test_inventory_lists_the_tiers_and_fails_a_required_one_missing():
    scratch = tier_text("scratch", "/scratch", NVME, healthy_jobs((1,)))
    text = tier_text("home", "/home/u", NFS, healthy_jobs((1,))) + scratch
    verdict = judge("storage.tier.inventory", text)[0]
    assert verdict.status == "pass" and verdict.value == 2 and "home (/home/u, nfs4, shared)" in verdict.summary
    missing = "=== tier home /home/u\nunwritable: cannot create /home/u/x\n" + scratch
    assert judge("storage.tier.inventory", missing)[0].status == "fail"
    cut = scratch + "=== tier shm /dev/shm\nmount: /dev/shm tmpfs tmpfs 1 1\n"
    assert judge("storage.tier.inventory", cut)[0].status == "error"
    nothing = "=== tier home \nmissing: no such directory\n"
    assert judge("storage.tier.inventory", nothing, {"required_tiers": []})[0].status == "skip"


def test_sequential_bandwidth_is_judged_on_what_backs_each_tier():
    slow_nfs = [fio_job(f"{job}.c1", 150.0 if job.startswith("seq") else 100.0, 5.0) for job in JOBS]
    dead_nvme = [fio_job(f"{job}.c1", 50.0, 5.0) for job in JOBS]
    text = tier_text("home", "/home/u", NFS, slow_nfs) + tier_text("scratch", "/scratch", NVME, dead_nvme)
    verdicts = judge("storage.tier.seq_write", text)
    assert by_tier(verdicts, tier="home").status == "warn"  # 150 MB/s on NFS: below 300, above 100
    assert by_tier(verdicts, tier="scratch").status == "fail"  # 50 MB/s on NVMe
    good = judge("storage.tier.seq_read", tier_text("scratch", "/scratch", NVME, healthy_jobs((1,))))[0]
    assert good.status == "pass" and good.expected["matched"] == "tier-nvme" and good.series
    failed = [fio_job(f"{job}.c1", 0.0, 5.0, error=5 if job == "seq_write_1m_direct" else 0) for job in JOBS]
    assert judge("storage.tier.seq_write", tier_text("scratch", "/scratch", NVME, failed))[0].status == "fail"
    only_random = [fio_job(f"rand_read_4k_buffered.c{c}", 10.0, 5.0) for c in (1, 2)]
    assert judge("storage.tier.seq_read", tier_text("scratch", "/scratch", NVME, only_random))[0].status == "skip"
    unmeasured = "=== tier home /root\nmissing: no such directory\n"
    assert judge("storage.tier.seq_read", unmeasured)[0].status == "skip"
    broken_fio = "=== tier home /root\nmount: / /dev/sda1 ext4 1 1\n{\"jobs\": [\nfio-exit: 1\n"
    assert judge("storage.tier.seq_read", broken_fio)[0].status == "skip"


def test_scaling_finds_throughput_that_falls_as_clients_grow():
    falling = [fio_job(f"{job}.c{c}", {1: 3000.0, 2: 2000.0, 4: 1200.0}[c] if job == "seq_read_1m_direct"
                       else 1000.0 * c, 5.0) for c in (1, 2, 4) for job in JOBS]
    verdicts = judge("storage.tier.scaling", tier_text("home", "/home/u", NFS, falling))
    assert by_tier(verdicts, job="seq_read_1m_direct").status == "fail"  # 40% of the best
    assert "throughput falls as clients grow" in by_tier(verdicts, job="seq_read_1m_direct").summary
    assert by_tier(verdicts, job="seq_write_1m_direct").status == "pass"
    dipping = [fio_job(f"{job}.c{c}", {1: 1000.0, 2: 1000.0, 4: 650.0}[c], 5.0) for c in (1, 2, 4) for job in JOBS]
    assert by_tier(judge("storage.tier.scaling", tier_text("home", "/h", NFS, dipping)), job="rand_read_4k_buffered"
                   ).status == "warn"
    one_point = judge("storage.tier.scaling", tier_text("home", "/h", NFS, healthy_jobs((1,))))
    assert {v.status for v in one_point} == {"skip"}


def test_reads_far_slower_than_writes():
    lopsided = [fio_job(f"{job}.c1", 200.0 if "read" in job else 1000.0, 5.0) for job in JOBS]
    verdict = judge("storage.tier.read_vs_write", tier_text("scratch", "/scratch", NVME, lopsided))[0]
    assert verdict.status == "fail" and verdict.value == pytest.approx(0.2) and "reads far slower" in verdict.summary
    half = [fio_job(f"{job}.c1", 400.0 if "read" in job else 1000.0, 5.0) for job in JOBS]
    assert judge("storage.tier.read_vs_write", tier_text("s", "/s", NVME, half))[0].status == "warn"
    assert judge("storage.tier.read_vs_write", tier_text("s", "/s", NVME, healthy_jobs((1,))))[0].status == "pass"
    writes_only = [fio_job("seq_write_1m_direct.c1", 100.0, 5.0)]
    assert judge("storage.tier.read_vs_write", tier_text("s", "/s", NVME, writes_only))[0].status == "skip"


def test_buffered_tail_seconds_against_direct_hundreds_of_ms():
    stalling = [fio_job(f"{job}.c{c}", 500.0, 2500.0 if job.endswith("buffered") else 200.0)
                for c in (1, 2) for job in JOBS]
    verdict = judge("storage.tier.buffered_tail", tier_text("home", "/home/u", NFS, stalling))[0]
    assert verdict.status == "fail" and "buffered I/O stalls" in verdict.summary
    # a long ratio of two short tails is no finding
    quick = [fio_job(f"{job}.c1", 500.0, 50.0 if job.endswith("buffered") else 1.0) for job in JOBS]
    assert judge("storage.tier.buffered_tail", tier_text("home", "/h", NFS, quick))[0].status == "pass"
    slowish = [fio_job(f"{job}.c1", 500.0, 400.0 if job.endswith("buffered") else 50.0) for job in JOBS]
    assert judge("storage.tier.buffered_tail", tier_text("home", "/h", NFS, slowish))[0].status == "warn"
    tmpfs = [fio_job(f"{job}.c1", 5000.0, 1.0) for job in JOBS if job.endswith("buffered")]
    shm = tier_text("shm", "/dev/shm", "/dev/shm tmpfs tmpfs 1 1", tmpfs)
    assert judge("storage.tier.buffered_tail", shm)[0].status == "skip"


def test_errors_at_higher_client_counts_fail_and_a_silent_fio_failure_is_an_error():
    erring = [fio_job(f"{job}.c{c}", 500.0, 5.0, error=11 if c == 4 and "write" in job else 0)
              for c in (1, 2, 4) for job in JOBS]
    verdict = judge("storage.tier.errors", tier_text("home", "/home/u", NFS, erring))[0]
    assert verdict.status == "fail" and "EAGAIN (11)" in verdict.summary and "at 4 clients" in verdict.summary
    assert judge("storage.tier.errors", tier_text("home", "/h", NFS, healthy_jobs()))[0].status == "pass"
    silent = judge("storage.tier.errors", tier_text("home", "/h", NFS, healthy_jobs(), fio_exit=1))[0]
    assert silent.status == "error"


def judge_fleet(texts: dict[str, str]) -> list[checks.Verdict]:
    ctx = checks.Context(subject="_cluster", host_probes={
        host: {PROBE: {"name": PROBE, "rc": 0, "stdout": text, "parser": "probe-storage-tiers"}}
        for host, text in texts.items()})
    outcome = checks.run_check("storage.tier.shared_aggregate", checks.registered()["storage.tier.shared_aggregate"],
                               ctx)
    return outcome if isinstance(outcome, list) else [outcome]


def test_a_shared_tier_is_judged_on_what_all_nodes_got_at_once():
    def shared(per_client: dict[int, float]) -> str:
        return tier_text("shared_home", "/home", NFS, [fio_job(f"{job}.c{c}", mbps, 5.0) for c, mbps in
                                                       per_client.items() for job in JOBS])

    holding = judge_fleet({h: shared({1: 500.0, 2: 480.0}) for h in ("node1", "node2", "node3")})
    verdict = holding[0]
    assert verdict.status == "pass" and verdict.subject == "tier:shared_home"
    assert verdict.params["source"] == "10.0.0.5:/export/home" and "3 nodes at once" in verdict.summary
    rows = verdict.series[0]["data"]
    assert {r["total_clients"] for r in rows} == {3, 6} and rows[0]["aggregate_mbps"] == pytest.approx(1500.0)
    collapsing = judge_fleet({h: shared({1: 500.0, 2: 150.0}) for h in ("node1", "node2")})[0]
    assert collapsing.status == "fail" and "aggregate throughput falls" in collapsing.summary
    alone = judge_fleet({"node1": shared({1: 500.0, 2: 480.0}),
                         "node2": tier_text("scratch", "/scratch", NVME, healthy_jobs((1, 2)))})[0]
    assert alone.status == "skip" and "only node1 measured" in alone.summary
    local_only = judge_fleet({"node1": tier_text("scratch", "/scratch", NVME, healthy_jobs((1,)))})
    assert local_only[0].status == "skip" and "no node measured a shared" in local_only[0].summary
    one_step = judge_fleet({h: shared({1: 500.0}) for h in ("node1", "node2")})[0]
    assert one_step.status == "skip" and "fewer than two client counts" in one_step.summary
