"""Tests for the fio parser against the real outputs in the corpus and hand-written edge cases."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus


@pytest.mark.parametrize("path", corpus_files("fio"), ids=lambda p: p.name)
def test_every_corpus_file_parses_completely(path):
    out = parse("fio", path.read_bytes())
    assert out["complete"] is True
    assert out["jobs"], "every fio corpus file holds one job"
    json.dumps(out)
    for job in out["jobs"]:
        assert set(job) >= {"name", "error", "read", "write", "trim"}
        assert job["error"] == 0


def test_fio_2_18_json_uses_usec_latencies_and_kib_io_bytes():
    out = parse("fio", read_corpus("fio", "fio-2.18-json-randread-qd1-1job.json"))
    assert out["format"] == "json"
    assert out["fio_version"] == "fio-2.18-59-g618e"
    job = out["jobs"][0]
    assert job["name"] == "random-io"
    read = job["read"]
    assert read["bw_kibps"] == 14806
    assert read["bw_mibps"] == pytest.approx(14806 / 1024, rel=1e-6)
    assert read["iops"] == pytest.approx(3701.529847)
    assert read["runtime_ms"] == 10001
    assert read["total_ios"] == 37019
    # fio 2.x printed io_bytes in KiB: 148076 KiB == 37019 x 4 KiB
    assert read["io_bytes"] == 148076 * 1024 == 37019 * 4096
    assert read["clat_mean_us"] == pytest.approx(253.169535)
    assert read["lat_mean_us"] == pytest.approx(264.767768)
    assert read["clat_percentiles_us"]["99.000000"] == 628
    assert "0.00" not in read["clat_percentiles_us"]
    # a direction without I/O is still there, with zeros
    assert job["write"]["bw_mibps"] == 0 and job["write"]["iops"] == 0 and job["write"]["total_ios"] == 0


@pytest.mark.parametrize("name, p99_ns", [
    ("fio-3.1-json-hp-dl380-raid0-randread.json", 140288),
    ("fio-3.6-json-ceph-ssd-randread-qd1.json", 864256),
])
def test_fio_3_json_clat_ns_percentiles_become_us(name, p99_ns):
    read = parse("fio", read_corpus("fio", name))["jobs"][0]["read"]
    assert read["clat_percentiles_us"]["99.000000"] == pytest.approx(p99_ns / 1000)


def test_fio_3_6_json_bandwidth():
    out = parse("fio", read_corpus("fio", "fio-3.6-json-ceph-ssd-randread-qd1.json"))
    read = out["jobs"][0]["read"]
    assert read["bw_kibps"] == 5720
    assert read["io_bytes"] == 351502336
    assert read["iops"] == pytest.approx(1430.242829)
    assert out["totals"]["read"]["iops"] == pytest.approx(1430.242829)


def test_fio_3_16_randrw_both_directions_and_lat_percentiles():
    out = parse("fio", read_corpus("fio", "fio-3.16-json-nvme-randrw.json"))
    job = out["jobs"][0]
    assert job["name"] == "rand_read_write"
    assert job["read"]["bw_kibps"] == 340570
    assert job["write"]["bw_kibps"] == 340283
    assert job["read"]["clat_mean_us"] == pytest.approx(1444.476063469)
    assert job["read"]["lat_mean_us"] == pytest.approx(1446.562147113)
    # this run had lat_percentiles=1: the percentile map sits under lat_ns, not clat_ns
    assert job["read"]["lat_percentiles_us"]["99.000000"] == pytest.approx(2244.608)
    assert job["write"]["lat_percentiles_us"]["99.000000"] == pytest.approx(2072.576)
    assert out["totals"]["read"]["bw_mibps"] == pytest.approx(340570 / 1024, rel=1e-6)
    assert out["totals"]["write"]["iops"] == pytest.approx(85066.128925)


def test_fio_2_2_10_text():
    out = parse("fio", read_corpus("fio", "fio-2.2.10-text-rbd-engine-write-256k.txt"))
    assert out["format"] == "text"
    assert out["fio_version"] == "fio-2.2.10"
    job = out["jobs"][0]
    assert job["name"] == "vol_base_test"
    write = job["write"]
    assert write["bw_kibps"] == 26099
    assert write["iops"] == 101
    assert write["runtime_ms"] == 40177
    assert write["io_bytes"] == 1024 * 1024 * 1024
    assert write["clat_mean_us"] == pytest.approx(9760)
    assert write["lat_mean_us"] == pytest.approx(9810)
    assert write["clat_percentiles_us"]["99.000000"] == 17280
    assert write["total_ios"] == 4096
    assert job["read"]["iops"] == 0


def test_fio_3_25_text_nsec_percentiles_and_sync():
    out = parse("fio", read_corpus("fio", "fio-3.25-text-sync-fdatasync-write-4k-zfs.txt"))
    assert out["fio_version"] == "fio-3.25"
    write = out["jobs"][0]["write"]
    assert write["iops"] == 4801
    assert write["bw_mibps"] == pytest.approx(18.8)
    assert write["runtime_ms"] == 1173
    assert write["clat_mean_us"] == pytest.approx(13.46214)
    assert write["lat_mean_us"] == pytest.approx(13.73186)
    assert write["clat_percentiles_us"]["99.000000"] == pytest.approx(23.168)
    assert write["total_ios"] == 5632
    sync = out["jobs"][0]["sync"]
    assert sync["lat_mean_us"] == pytest.approx(192.48)
    assert sync["lat_percentiles_us"]["99.000000"] == 260


# ---- hand-written edge cases (structure of fio 3.x JSON, values invented) -------------------------

def _fio3_json(jobs: int = 2) -> str:
    def direction(bw_kib: int, iops: float) -> dict:
        return {"io_bytes": bw_kib * 1024 * 10, "io_kbytes": bw_kib * 10, "bw_bytes": bw_kib * 1024,
                "bw": bw_kib, "iops": iops, "runtime": 10000, "total_ios": int(iops * 10),
                "slat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0},
                "clat_ns": {"min": 1000, "max": 9000, "mean": 2500.0, "stddev": 10.0,
                            "percentile": {"50.000000": 2000, "99.000000": 8000}},
                "lat_ns": {"min": 1100, "max": 9100, "mean": 2600.0, "stddev": 10.0}}
    doc = {"fio version": "fio-3.33", "timestamp": 1, "jobs": [
        {"jobname": f"job{i}", "groupid": 0, "error": 0, "read": direction(102400, 25600.0),
         "write": direction(0, 0.0), "trim": direction(0, 0.0)} for i in range(jobs)]}
    return json.dumps(doc, indent=2)


def test_note_lines_before_json_are_skipped_with_a_warning():
    note = ("note: both iodepth >= 1 and synchronous I/O engine are selected, "
            "queue depth will be capped at 1\n")
    out = parse("fio", note + _fio3_json())
    assert out["complete"] is True
    assert any("note: both iodepth" in w for w in out["warnings"])
    assert out["jobs"][0]["read"]["clat_percentiles_us"] == {"50.000000": 2.0, "99.000000": 8.0}


def test_totals_sum_over_jobs():
    out = parse("fio", _fio3_json(jobs=3))
    assert out["totals"]["read"]["bw_mibps"] == pytest.approx(300.0)
    assert out["totals"]["read"]["iops"] == pytest.approx(76800.0)
    assert out["totals"]["write"] == {"bw_mibps": 0.0, "iops": 0.0}


def test_truncated_json_names_the_byte():
    text = _fio3_json()
    cut = text[: len(text) // 2]
    with pytest.raises(ParseError, match=rf"fio JSON is truncated at byte {len(cut.encode())}"):
        parse("fio", cut)


def test_truncated_json_real_file():
    text = read_corpus("fio", "fio-3.16-json-nvme-randrw.json")
    with pytest.raises(ParseError, match="truncated"):
        parse("fio", text[:3000])


def test_missing_fio_version_is_an_error():
    with pytest.raises(ParseError, match="fio version"):
        parse("fio", '{"jobs": []}')


def test_garbage_and_empty():
    with pytest.raises(ParseError, match="empty"):
        parse("fio", "   \n")
    with pytest.raises(ParseError):
        parse("fio", "\x00\xff random bytes that are not fio")
    with pytest.raises(ParseError, match="malformed"):
        parse("fio", '{"fio version": "fio-3.1",, "jobs": []}\n\n')


def test_job_error_is_reported():
    doc = json.loads(_fio3_json(jobs=1))
    doc["jobs"][0]["error"] = 5
    out = parse("fio", json.dumps(doc))
    assert out["jobs"][0]["error"] == 5
    assert any("error 5" in w for w in out["warnings"])


def test_text_cut_before_run_status_is_incomplete():
    text = read_corpus("fio", "fio-3.25-text-sync-fdatasync-write-4k-zfs.txt")
    cut = text[: text.index("Run status group")]
    out = parse("fio", cut)
    assert out["complete"] is False
    assert out["jobs"][0]["write"]["iops"] == 4801


def test_text_cut_before_any_job_is_an_error():
    text = read_corpus("fio", "fio-3.25-text-sync-fdatasync-write-4k-zfs.txt")
    with pytest.raises(ParseError, match="no fio job results"):
        parse("fio", text[: text.index("mytest: (groupid")])


@pytest.mark.parametrize("path", corpus_files("fio"), ids=lambda p: p.name)
def test_truncation_at_any_line_never_raises_anything_else(path):
    text = path.read_text(errors="replace")
    lines = text.split("\n")
    for n in range(0, len(lines), 3):
        try:
            parse("fio", "\n".join(lines[:n]))
        except ParseError:
            pass
