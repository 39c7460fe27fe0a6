"""Lifecycle checks (checks/lifecycle.py) on the records the lifecycle probes print, every status of every check;
the parser; and the probes' own shell where it can run here in seconds: WAN transfers to a local HTTP server,
a server started and stopped (a stand-in vllm), the clean-up, and that credentials in an index URL reach no file
of the run directory."""

from __future__ import annotations

import http.server
import json
import os
import random
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from clustereval import parsers, rundir
from clustereval.checks import Context, probe_catalogue
from clustereval.parsers import _mutate
from clustereval.parsers._common import clean
from tests.helpers import judge_many

TIERS = [{"name": "home", "path": "~"}, {"name": "scratch", "path": "/scratch"}]
OPTIONS = {"tiers": TIERS, "packages": ["requests==2.32.3", "rich==13.9.4", "tqdm==4.67.1"]}
END = "end state=ok\n"


def record(name: str, stdout: str, rc: int = 0, **fields) -> dict[str, dict]:
    return {name: {"name": name, "cmd": name, "rc": rc, "stdout": stdout, "stderr": "", "parser": "probe-lifecycle",
                   "artifact": f"raw/n1/{name}.txt", **fields}}


def judge(check_id: str, probes: dict, **options) -> list[dict]:
    ctx = Context(subject="n1", probes=probes, options={**OPTIONS, **options})
    results = judge_many(check_id, ctx)
    for result in results:
        if result["status"] == "skip":
            assert result["summary"].strip()
    return results


def by(results: list[dict], **params) -> dict:
    found = [r for r in results if all(r.get("params", {}).get(k) == v for k, v in params.items())]
    assert len(found) == 1, (params, [r.get("params") for r in results])
    return found[0]


# ------------------------------------------------------------------------------------------------ the parser

def test_the_parser_reads_records_numbers_and_a_reason_holding_blanks_and_equals():
    data = parsers.parse("probe-lifecycle", "tier name=home state=ok fstype=nfs4 source=srv:/export\n"
                                            "some pip noise that slipped through\n"
                                            "install tier=home installer=pip rc=1 install_s=3.250 installed=0 "
                                            "reason=ERROR: No matching distribution found for x==1 (from a=b)\n"
                                            + END)
    assert data["complete"] and data["warnings"] == ["1 line(s) that are no lifecycle record were ignored"]
    tier, install, end = data["records"]
    assert tier == {"record": "tier", "name": "home", "state": "ok", "fstype": "nfs4", "source": "srv:/export"}
    assert install["rc"] == 1 and install["install_s"] == 3.25 and install["installed"] == 0
    assert install["reason"] == "ERROR: No matching distribution found for x==1 (from a=b)"
    assert end == {"record": "end", "state": "ok"}


def test_the_parser_says_when_output_stops_early_and_refuses_output_with_no_record():
    cut = parsers.parse("probe-lifecycle", "tier name=home state=ok\ninstall tier=home installer=pip rc=zero\n")
    assert cut["complete"] is False and cut["records"][1]["rc"] == "zero"
    assert "rc=zero is not a number" in cut["warnings"]
    with pytest.raises(parsers.ParseError, match="no lifecycle record"):
        parsers.parse("probe-lifecycle", "Traceback (most recent call last):\n  oops\n")


@pytest.mark.parametrize("mutation", sorted(_mutate.MUTATIONS))
def test_the_parser_takes_any_damage_with_a_parse_error_at_worst(mutation):
    sample = (install_output() + import_output()).encode()
    for seed in range(5):
        damaged = _mutate.MUTATIONS[mutation](sample, random.Random(seed))
        try:
            json.dumps(parsers.get("probe-lifecycle")(clean(damaged)), allow_nan=False)
        except parsers.ParseError as exc:
            assert str(exc).strip()
    for cut in range(0, len(sample) + 1, 7):
        try:
            parsers.parse("probe-lifecycle", sample[:cut])
        except parsers.ParseError:
            pass
    plain = parsers.parse("probe-lifecycle", sample)
    for wrap in ("srun_prefix", "mpirun_prefix"):
        assert parsers.parse("probe-lifecycle", _mutate.MUTATIONS[wrap](sample, random.Random(7))) == plain


# ------------------------------------------------------------------------------------------------ installs

def install_output(pip_s: float = 4.2, uv: str | None = None, tier2: str = "ok") -> str:
    uv_line = uv or "install tier={t} installer=uv state=skipped reason=uv is not installed on the node (...)"
    out = ""
    for name, state in (("home", "ok"), ("scratch", tier2)):
        if state != "ok":
            out += f"tier name={name} state={state} reason=mkdir: cannot create directory: Read-only file system\n"
            continue
        out += (f"tier name={name} state=ok fstype=nfs4 source=srv:/home\n"
                f"install tier={name} installer=pip stage=install rc=0 venv_s=2.100 install_s={pip_s} installed=9 \n"
                + uv_line.format(t=name) + "\n")
    return out + END


def test_install_passes_warns_and_fails_on_the_time_and_skips_without_uv():
    results = judge("lifecycle.install.packages", record("lifecycle_install", install_output(4.2)))
    assert len(results) == 4
    pip = by(results, tier="home", installer="pip")
    assert pip["status"] == "pass" and pip["value"] == 4.2 and pip["unit"] == "s"
    assert pip["summary"] == ("pip installed 9 packages into a fresh venv on home (nfs4) in 4.2 s with an empty "
                              "cache (venv made in 2.1 s)")
    assert pip["expected"]["max"] == 30 and pip["expected"]["matched"] == "pip"
    assert pip["evidence"]["sources"] == "pip's own configuration"
    uv = by(results, tier="scratch", installer="uv")
    assert uv["status"] == "skip" and "uv is not installed" in uv["summary"]
    assert by(judge("lifecycle.install.packages", record("lifecycle_install", install_output(45.0))),
              tier="home", installer="pip")["status"] == "warn"
    slow = by(judge("lifecycle.install.packages", record("lifecycle_install", install_output(150.0))),
              tier="home", installer="pip")
    assert slow["status"] == "fail" and "above the failure level 120 s" in slow["summary"]


def test_uv_is_judged_against_its_own_reference():
    uv = "install tier={t} installer=uv stage=install rc=0 venv_s=0.050 install_s=20.0 installed=9 "
    result = by(judge("lifecycle.install.packages", record("lifecycle_install", install_output(4.2, uv))),
                tier="home", installer="uv")
    assert result["status"] == "warn" and result["expected"]["matched"] == "uv" and result["expected"]["max"] == 15


def test_a_failed_install_an_unwritable_tier_a_missing_tier_and_a_timeout():
    failed = install_output().replace("stage=install rc=0 venv_s=2.100 install_s=4.2 installed=9 ",
                                      "stage=install rc=1 venv_s=2.100 install_s=15.3 installed=0 reason=ERROR: "
                                      "Could not find a version that satisfies the requirement rich==13.9.4", 1)
    result = by(judge("lifecycle.install.packages", record("lifecycle_install", failed)), tier="home",
                installer="pip")
    assert result["status"] == "fail" and "failed after 15.3 s: ERROR: Could not find a version" in result["summary"]
    unwritable = judge("lifecycle.install.packages", record("lifecycle_install", install_output(tier2="unwritable")))
    for installer in ("pip", "uv"):
        item = by(unwritable, tier="scratch", installer=installer)
        assert item["status"] == "fail" and "cannot write to tier scratch (/scratch)" in item["summary"]
    missing = install_output().replace("tier name=scratch state=ok fstype=nfs4 source=srv:/home",
                                       "tier name=scratch state=missing reason=no such directory: /scratch")
    assert by(judge("lifecycle.install.packages", record("lifecycle_install", missing)), tier="scratch",
              installer="pip")["status"] == "skip"
    venv = install_output().replace("stage=install rc=0 venv_s=2.100 install_s=4.2 installed=9 ",
                                    "stage=venv rc=124 venv_s=600.000 ", 1)
    result = by(judge("lifecycle.install.packages", record("lifecycle_install", venv), install_timeout_s=600),
                tier="home", installer="pip")
    assert result["status"] == "fail" and result["summary"] == "the venv on home (nfs4) did not finish within 600 s"


def test_install_errors_are_the_harness_s():
    cut = install_output().split("tier name=scratch")[0]
    result = by(judge("lifecycle.install.packages", record("lifecycle_install", cut)), tier="scratch",
                installer="pip")
    assert result["status"] == "error" and "output ends before it" in result["summary"]
    garbage = judge("lifecycle.install.packages", record("lifecycle_install", "sh: 1: Syntax error\n", rc=2))
    assert [r["status"] for r in garbage] == ["error"] and "printed nothing readable" in garbage[0]["summary"]
    guard = judge("lifecycle.install.packages", record("lifecycle_install", "end state=error reason=no work "
                                                                          "directory name given\n", rc=2))
    assert guard[0]["status"] == "error" and "could not run: no work directory name given" in guard[0]["summary"]
    timed_out = judge("lifecycle.install.packages", record("lifecycle_install", "", rc=None, timed_out=True,
                                                           timeout=3600))
    assert timed_out[0]["status"] == "error" and "timed out after 3600 s" in timed_out[0]["summary"]
    assert judge("lifecycle.install.packages", {})[0]["status"] == "error"  # not collected


# ------------------------------------------------------------------------------------------------ import torch

def import_output(warm: tuple[float, ...] = (1.6, 1.5, 1.7), cold: str | None = None, first: str = "rc=0 "
                  "import_s=2.300 ") -> str:
    cold_line = cold or ("import tier={t} phase=cold state=skipped reason=actions were not allowed (no "
                         "CLUSTEREVAL_ALLOW_ACTIONS=1 in the environment): the page cache is not dropped")
    out = "actions allowed=0 reason=actions were not allowed\n"
    for name in ("home", "scratch"):
        out += (f"tier name={name} state=ok fstype=ext4 source=/dev/nvme0n1p1\n"
                f"import tier={name} stage=copy rc=0 copy_s=6.993 bytes=718532564 files=5013 version=2.13.0+cpu\n"
                f"import tier={name} phase=first repeat=1 {first}\n" + cold_line.format(t=name) + "\n"
                + "".join(f"import tier={name} phase=warm repeat={i + 1} rc=0 import_s={s} \n"
                          for i, s in enumerate(warm)))
    return out + END


def test_warm_import_is_judged_on_the_median_and_cold_is_a_skip_saying_warm_only():
    results = judge("lifecycle.import.torch", record("lifecycle_import_torch", import_output()))
    assert len(results) == 4
    warm = by(results, tier="home", cache="warm")
    assert warm["status"] == "pass" and warm["value"] == 1.6
    assert warm["summary"] == ("import torch 2.13.0+cpu takes 1.6 s warm (median of 3) from an environment on home "
                               "(ext4); warm only, the page cache was not dropped")
    assert warm["evidence"]["warm_s"] == [1.6, 1.5, 1.7] and warm["evidence"]["copied_files"] == 5013
    cold = by(results, tier="scratch", cache="cold")
    assert cold["status"] == "skip" and "warm only" in cold["summary"] and "first import after copying took 2.3 s" \
        in cold["summary"]
    assert by(judge("lifecycle.import.torch", record("lifecycle_import_torch", import_output((6.0, 7.0, 6.5)))),
              tier="home", cache="warm")["status"] == "warn"
    slow = by(judge("lifecycle.import.torch", record("lifecycle_import_torch", import_output((14.0, 15.0, 16.0)))),
              tier="home", cache="warm")
    assert slow["status"] == "fail" and "above the failure level 12 s" in slow["summary"]


def test_a_cold_import_when_actions_were_allowed_has_its_own_reference():
    cold = "import tier={t} phase=cold repeat=1 rc=0 import_s=3.100 "
    results = judge("lifecycle.import.torch", record("lifecycle_import_torch", import_output(cold=cold)))
    item = by(results, tier="home", cache="cold")
    assert item["status"] == "pass" and item["value"] == 3.1 and item["expected"]["matched"] == "cold-import"
    assert "warm only" not in by(results, tier="home", cache="warm")["summary"]
    slow = "import tier={t} phase=cold repeat=1 rc=0 import_s=22.000 "
    assert by(judge("lifecycle.import.torch", record("lifecycle_import_torch", import_output(cold=slow))),
              tier="home", cache="cold")["status"] == "fail"


def test_an_import_that_fails_or_hangs_a_copy_that_fails_and_no_environment_at_all():
    broken = import_output(first="rc=1 import_s=0.400 reason=ImportError: libtorch_cpu.so: cannot open shared "
                                 "object file")
    item = by(judge("lifecycle.import.torch", record("lifecycle_import_torch", broken)), tier="home", cache="warm")
    assert item["status"] == "fail" and "libtorch_cpu.so" in item["summary"]
    hung = import_output(first="rc=124 import_s=300.000 ")
    item = by(judge("lifecycle.import.torch", record("lifecycle_import_torch", hung), import_timeout_s=300),
              tier="home", cache="cold")
    assert item["status"] == "fail" and item["summary"].endswith("it did not finish within 300 s")
    full = import_output().replace("import tier=home stage=copy rc=0 copy_s=6.993 bytes=718532564 files=5013 "
                                   "version=2.13.0+cpu", "import tier=home stage=copy rc=1 copy_s=1.0 reason=tar: "
                                   "torch/lib/libtorch_cpu.so: Cannot write: No space left on device")
    item = by(judge("lifecycle.import.torch", record("lifecycle_import_torch", full)), tier="home", cache="warm")
    assert item["status"] == "fail" and "No space left on device" in item["summary"]
    none = ("actions allowed=0 reason=x\nimport state=skipped reason=no Python environment at /var/tmp/venv to take "
            "PyTorch from\n" + END)
    results = judge("lifecycle.import.torch", record("lifecycle_import_torch", none))
    assert len(results) == 4 and {r["status"] for r in results} == {"skip"}
    assert "no Python environment at /var/tmp/venv" in results[0]["summary"]


def test_import_errors_are_the_harness_s():
    cut = import_output().split("phase=warm")[0]
    item = by(judge("lifecycle.import.torch", record("lifecycle_import_torch", cut)), tier="home", cache="warm")
    assert item["status"] == "error" and "output ends before them" in item["summary"]
    nothing = judge("lifecycle.import.torch", record("lifecycle_import_torch", "actions allowed=0\n"))
    assert {r["status"] for r in nothing} == {"error"}


# ------------------------------------------------------------------------------------------------ WAN

ENDPOINTS = [{"name": "hf", "kind": "download", "url": "https://hf.example/f", "required": False},
             {"name": "mirror", "kind": "download", "url": "https://user:s3cret-token@mirror.example/f",
              "required": True},
             {"name": "cdn", "kind": "upload", "url": "https://cdn.example/up", "required": False}]


def wan(hf: str, mirror: str, cdn: str) -> dict:
    return record("lifecycle_wan", f"wan name=hf kind=download {hf}\nwan name=mirror kind=download {mirror}\n"
                                   f"wan name=cdn kind=upload {cdn}\n" + END)


OK_DOWN = "rc=0 http=206 bytes=100000000 up_bytes=0 total_s=1.250 connect_s=0.010 ttfb_s=0.050 reason="
NO_DNS = ("rc=6 http=000 bytes=0 up_bytes=0 total_s=0.004 connect_s=0.000 ttfb_s=0.000 reason=curl: (6) Could not "
          "resolve host: hf.example")
OK_UP = "rc=0 http=200 bytes=12 up_bytes=25000000 total_s=2.000 connect_s=0.010 ttfb_s=1.9 reason="


def test_wan_rates_pass_warn_and_fail_an_unreachable_endpoint_skips_or_fails_when_required():
    results = judge("lifecycle.wan.transfer", wan(OK_DOWN, NO_DNS, OK_UP), endpoints=ENDPOINTS)
    hf = by(results, endpoint="hf")
    assert hf["status"] == "pass" and hf["value"] == 80.0 and hf["unit"] == "MB/s"
    assert hf["summary"] == "download from hf at 80.0 MB/s (100 MB in 1.2 s)"
    mirror = by(results, endpoint="mirror")
    assert mirror["status"] == "fail" and "is required: curl: (6) Could not resolve host" in mirror["summary"]
    assert mirror["evidence"]["url"] == "https://<redacted>@mirror.example/f"  # credentials never in a result
    up = by(results, endpoint="cdn", direction="upload")
    assert up["status"] == "pass" and up["value"] == 12.5 and up["expected"]["matched"] == "upload"
    slow = "rc=28 http=206 bytes=60000000 up_bytes=0 total_s=60.000 connect_s=0.010 ttfb_s=0.050 reason=curl: (28)"
    results = judge("lifecycle.wan.transfer", wan(slow, OK_DOWN, OK_UP), endpoints=ENDPOINTS)
    assert by(results, endpoint="hf")["status"] == "fail" and "cut at the transfer time limit" in \
        by(results, endpoint="hf")["summary"]
    medium = OK_DOWN.replace("total_s=1.250", "total_s=5.000")
    assert by(judge("lifecycle.wan.transfer", wan(medium, OK_DOWN, OK_UP), endpoints=ENDPOINTS),
              endpoint="hf")["status"] == "warn"
    skipped = by(judge("lifecycle.wan.transfer", wan(NO_DNS, OK_DOWN, OK_UP), endpoints=ENDPOINTS), endpoint="hf")
    assert skipped["status"] == "skip" and "unreachable from n1 (not required)" in skipped["summary"]


def test_a_download_and_an_upload_of_one_endpoint_are_two_variants():
    both = [{"name": "cdn", "kind": "download"}, {"name": "cdn", "kind": "upload"}]
    out = record("lifecycle_wan", f"wan name=cdn kind=download {OK_DOWN}\nwan name=cdn kind=upload {NO_DNS}\n" + END)
    results = judge("lifecycle.wan.transfer", out, endpoints=both)
    assert by(results, endpoint="cdn", direction="download")["status"] == "pass"
    assert by(results, endpoint="cdn", direction="upload")["status"] == "skip"


def test_no_endpoint_or_model_configured_is_one_skip_saying_so():
    [wan_skip] = judge("lifecycle.wan.transfer", record("lifecycle_wan", END), endpoints=[])
    assert wan_skip["status"] == "skip" and "clustereval_lifecycle_endpoints is empty" in wan_skip["summary"]
    [model_skip] = judge("lifecycle.model.download", record("lifecycle_model", END), models=[])
    assert model_skip["status"] == "skip" and "clustereval_lifecycle_models is empty" in model_skip["summary"]


def test_an_http_error_and_a_transfer_too_small_to_measure_are_skips_and_a_missing_record_an_error():
    forbidden = "rc=0 http=403 bytes=120 up_bytes=0 total_s=0.100 connect_s=0.010 ttfb_s=0.090 reason="
    tiny = "rc=0 http=200 bytes=5000 up_bytes=0 total_s=0.100 connect_s=0.010 ttfb_s=0.090 reason="
    results = judge("lifecycle.wan.transfer", wan(forbidden, tiny, OK_UP), endpoints=ENDPOINTS)
    assert by(results, endpoint="hf")["status"] == "skip" and "HTTP 403" in by(results, endpoint="hf")["summary"]
    assert by(results, endpoint="mirror")["status"] == "skip" and "too little" in by(results, endpoint="mirror")[
        "summary"]
    cut = record("lifecycle_wan", f"wan name=hf kind=download {OK_DOWN}\n")
    results = judge("lifecycle.wan.transfer", cut, endpoints=ENDPOINTS)
    assert by(results, endpoint="cdn")["status"] == "error" and "ends before it" in by(results, endpoint="cdn")[
        "summary"]
    no_curl = judge("lifecycle.wan.transfer", record("lifecycle_wan", "", rc=127, missing=True, tool="curl"),
                    endpoints=ENDPOINTS)
    assert no_curl[0]["status"] == "skip" and "`curl` is not installed" in no_curl[0]["summary"]


# ------------------------------------------------------------------------------------------------ container pull

def pull(line: str) -> dict:
    return record("lifecycle_pull", line + "\n" + END)


def test_container_pull_every_status():
    image = {"image": "docker.io/library/python:3.12-slim"}
    ok = judge("lifecycle.container.pull", pull("pull runtime=enroot rc=0 pull_s=12.400 bytes=48000000 "), **image)[0]
    assert ok["status"] == "pass" and ok["value"] == 12.4 and ok["params"] == image
    assert ok["summary"] == ("enroot pulled docker.io/library/python:3.12-slim in 12.4 s with an empty cache, "
                             "a 48 MB image")
    assert judge("lifecycle.container.pull", pull("pull runtime=enroot rc=0 pull_s=90 bytes=1 "), **image)[0][
        "status"] == "warn"
    limited = judge("lifecycle.container.pull", pull(
        "pull runtime=enroot rc=1 pull_s=1.2 bytes=0 reason=[ERROR] URL https://registry-1.docker.io/v2/library/"
        "python/manifests/3.12-slim returned error code: 429 Too Many Requests"), **image)[0]
    assert limited["status"] == "fail" and "429 Too Many Requests" in limited["summary"]
    unreachable = "pull runtime=enroot rc=6 pull_s=0.1 bytes=0 reason=curl: (6) Could not resolve host: " \
                  "registry-1.docker.io"
    assert judge("lifecycle.container.pull", pull(unreachable), **image)[0]["status"] == "skip"
    assert judge("lifecycle.container.pull", pull(unreachable), container_required=True, **image)[0]["status"] == \
        "fail"
    none = judge("lifecycle.container.pull", pull("pull state=skipped reason=no container runtime is installed on "
                                                  "the node (looked for enroot, docker)"), **image)[0]
    assert none["status"] == "skip" and "looked for enroot" in none["summary"]
    assert judge("lifecycle.container.pull", record("lifecycle_pull", "actions allowed=0\n"), **image)[0][
        "status"] == "error"


# ------------------------------------------------------------------------------------------------ model downloads

MODELS = [{"name": "gpt2", "hub": "huggingface", "repo": "openai-community/gpt2"},
          {"name": "qwen", "hub": "modelscope", "repo": "Qwen/Qwen2.5-0.5B-Instruct", "required": True}]


def models(gpt2: str, qwen: str) -> dict:
    return record("lifecycle_model", f"model name=gpt2 hub=huggingface {gpt2}\nmodel name=qwen hub=modelscope "
                                     f"{qwen}\n" + END)


def test_model_downloads_every_status():
    fast = "rc=0 http=200 files=2 bytes=548000000 download_s=5.480 reason="
    gone = "rc=6 http=000 files=1 bytes=0 download_s=0.02 reason=curl: (6) Could not resolve host: www.modelscope.cn"
    results = judge("lifecycle.model.download", models(fast, gone), models=MODELS)
    gpt2 = by(results, model="gpt2")
    assert gpt2["status"] == "pass" and gpt2["value"] == 100.0 and gpt2["summary"] == \
        "gpt2 from Hugging Face at 100.0 MB/s (548 MB in 5.5 s)"
    qwen = by(results, model="qwen", hub="modelscope")
    assert qwen["status"] == "fail" and "is required" in qwen["summary"]
    slow = "rc=0 http=200 files=2 bytes=548000000 download_s=54.8 reason="
    gated = "rc=0 http=401 files=1 bytes=30 download_s=0.2 reason="
    optional = [MODELS[0], {**MODELS[1], "required": False}]
    results = judge("lifecycle.model.download", models(slow, gated), models=optional)
    assert by(results, model="gpt2")["status"] == "warn"
    assert by(results, model="qwen")["status"] == "skip" and "gated" in by(results, model="qwen")["summary"]
    unreachable = ("rc=6 http=000 files=1 bytes=0 download_s=0.01 reason=curl: (6) Could not resolve host: "
                   "huggingface.co")
    assert by(judge("lifecycle.model.download", models(unreachable, fast), models=MODELS), model="gpt2")[
        "status"] == "skip"
    crawl = "rc=0 http=200 files=2 bytes=548000000 download_s=548.0 reason="
    assert by(judge("lifecycle.model.download", models(crawl, fast), models=MODELS), model="gpt2")["status"] == "fail"
    cut = record("lifecycle_model", f"model name=gpt2 hub=huggingface {fast}\n")
    assert by(judge("lifecycle.model.download", cut, models=MODELS), model="qwen")["status"] == "error"


# ------------------------------------------------------------------------------------------------ serve

def serve(line: str) -> dict:
    return record("lifecycle_serve", line + "\n" + END)


def test_serve_ready_every_status():
    opts = {"serve_engine": "vllm", "serve_model": "/shared/models/qwen"}
    ok = judge("lifecycle.serve.ready", serve("serve engine=vllm state=ready ready_s=24.500 gpus=8 timeout_s=600 "),
               **opts)[0]
    assert ok["status"] == "pass" and ok["value"] == 24.5 and ok["params"] == {"engine": "vllm"}
    assert judge("lifecycle.serve.ready", serve("serve engine=vllm state=ready ready_s=75 gpus=8 timeout_s=600 "),
                 **opts)[0]["status"] == "warn"
    assert judge("lifecycle.serve.ready", serve("serve engine=vllm state=ready ready_s=150 gpus=8 timeout_s=600 "),
                 **opts)[0]["status"] == "fail"
    died = judge("lifecycle.serve.ready", serve("serve engine=vllm state=exited ready_s=8.1 gpus=8 timeout_s=600 "
                                                "reason=torch.OutOfMemoryError: CUDA out of memory"), **opts)[0]
    assert died["status"] == "fail" and "exited after 8.1 s" in died["summary"] and "out of memory" in died["summary"]
    late = judge("lifecycle.serve.ready", serve("serve engine=vllm state=timeout ready_s=600.2 gpus=8 timeout_s=600 "
                                                "reason=INFO Loading weights"), **opts)[0]
    assert late["status"] == "fail" and "within 600 s" in late["summary"]
    none = judge("lifecycle.serve.ready", serve("serve engine=vllm state=skipped reason=vllm is not installed on the "
                                                "node (clustereval installs no inference engine)"), **opts)[0]
    assert none["status"] == "skip" and "vllm is not installed" in none["summary"]
    odd = judge("lifecycle.serve.ready", serve("serve engine=vllm state=sleeping ready_s=1"), **opts)[0]
    assert odd["status"] == "error"


# ------------------------------------------------------------------------------------------------ the probes' shell

PROBES = {name: probe for name, probe in probe_catalogue.load().items() if name.startswith("lifecycle_")}


def run_probe(name: str, env: dict[str, str], cmd: str | None = None, timeout: int = 60) -> str:
    params = {key: "" for key in PROBES[name].get("params") or []}
    full = {**os.environ, **{f"CLUSTEREVAL_{k.upper()}": v for k, v in params.items()}, **env}
    proc = subprocess.run(["/bin/sh", "-c", cmd or PROBES[name]["cmd"]], capture_output=True, text=True,
                          timeout=timeout, env=full)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"\0" * 2_000_000 if self.path == "/blob" else b"nope"
        self.send_response(200 if self.path == "/blob" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_the_wan_probe_measures_a_local_server_and_names_what_it_could_not_reach(server):
    endpoints = [{"name": "local", "kind": "download", "url": f"{server}/blob"},
                 {"name": "up", "kind": "upload", "url": f"{server}/up"},
                 {"name": "closed", "kind": "download", "url": "http://127.0.0.1:9/x", "required": True},
                 {"name": "missing", "kind": "download", "url": f"{server}/nothing"}]
    text = "".join(f"{e['name']} {e['kind']} 2000000 {e['url']}\n" for e in endpoints)
    out = run_probe("lifecycle_wan", {"CLUSTEREVAL_ENDPOINTS": text, "CLUSTEREVAL_CONNECT_TIMEOUT_S": "2",
                                      "CLUSTEREVAL_TRANSFER_TIMEOUT_S": "10"})
    results = judge("lifecycle.wan.transfer", record("lifecycle_wan", out), endpoints=endpoints)
    assert by(results, endpoint="local")["status"] == "pass" and by(results, endpoint="local")["evidence"][
        "bytes"] == 2_000_000
    assert by(results, endpoint="up")["status"] == "pass"
    closed = by(results, endpoint="closed")
    assert closed["status"] == "fail" and "Failed to connect to 127.0.0.1 port 9" in closed["summary"]
    assert by(results, endpoint="missing")["status"] == "skip" and "HTTP 404" in by(results, endpoint="missing")[
        "summary"]


def test_the_serve_probe_times_a_server_until_it_answers_and_stops_all_of_it(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)'\n")
    # A stand-in for `vllm serve MODEL --host H --port P`: a second later it answers /v1/models.
    (bin_dir / "vllm").write_text(
        "#!/bin/sh\nsleep 1\nexec python3 -c '\nimport http.server, sys\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n        self.send_response(200); self.end_headers(); self.wfile.write(b\"{}\")\n"
        "    def log_message(self, *a): pass\n"
        "http.server.HTTPServer((\"127.0.0.1\", int(sys.argv[1])), H).serve_forever()\n' \"$6\"\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    (tmp_path / "model").mkdir()
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "CLUSTEREVAL_WORKNAME": "clustereval-lifecycle-t-n1",
           "CLUSTEREVAL_WORK_DIR": str(tmp_path), "CLUSTEREVAL_ENGINE": "vllm", "CLUSTEREVAL_MODEL": str(tmp_path /
                                                                                                   "model"),
           "CLUSTEREVAL_PORT": str(20000 + os.getpid() % 20000), "CLUSTEREVAL_SERVE_TIMEOUT_S": "30"}
    out = run_probe("lifecycle_serve", env)
    result = judge("lifecycle.serve.ready", record("lifecycle_serve", out), serve_engine="vllm",
                   serve_model=str(tmp_path / "model"))[0]
    assert result["status"] == "pass" and 1.0 <= result["value"] < 30
    assert not (tmp_path / "clustereval-lifecycle-t-n1").exists()
    left = subprocess.run(["pgrep", "-f", f"serve_forever.*{env['CLUSTEREVAL_PORT']}"], capture_output=True)
    assert left.returncode == 1, left.stdout  # the server's whole session was stopped
    none = run_probe("lifecycle_serve", {**env, "PATH": "/usr/bin:/bin"})
    assert "vllm is not installed on the node" in none


@pytest.fixture
def fake_torch(tmp_path) -> Path:
    """A venv whose `torch` is one small package (and headers, which the copy leaves out): the import probe's
    whole path in a second."""
    venv = tmp_path / "src-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    (site / "torch" / "include").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("from torch import _helper\n__version__ = '9.9.9+fake'\n")
    (site / "torch" / "_helper.py").write_text("VALUE = 1\n")
    (site / "torch" / "include" / "ATen.h").write_text("// only extension builds read this\n")
    (site / "unrelated").mkdir()
    (site / "unrelated" / "__init__.py").write_text("")
    return venv


def import_env(tmp_path: Path, venv: Path, **extra: str) -> dict[str, str]:
    tiers = tmp_path / "tiers"
    (tiers / "a").mkdir(parents=True, exist_ok=True)
    return {"HOME": str(tiers / "a"), "CLUSTEREVAL_TIERS": f"home=~\nscratch={tiers}\ngone={tiers / 'gone'}\n",
            "CLUSTEREVAL_WORKNAME": "clustereval-lifecycle-t-n1", "CLUSTEREVAL_TORCH_VENV": str(venv),
            "CLUSTEREVAL_REPEATS": "2", "CLUSTEREVAL_IMPORT_TIMEOUT_S": "60", **extra}


def test_the_import_probe_copies_what_import_torch_reads_onto_every_tier_and_times_it(tmp_path, fake_torch):
    out = run_probe("lifecycle_import_torch", import_env(tmp_path, fake_torch))
    options = {"tiers": [{"name": "home", "path": "~"}, {"name": "scratch", "path": str(tmp_path / "tiers")},
                         {"name": "gone", "path": str(tmp_path / "tiers" / "gone")}]}
    results = judge("lifecycle.import.torch", record("lifecycle_import_torch", out), **options)
    warm = by(results, tier="scratch", cache="warm")
    assert warm["status"] == "pass" and 0 < warm["value"] < 5 and "9.9.9+fake" in warm["summary"]
    # torch's two modules, not its headers, nor a package import torch never reads
    assert warm["evidence"]["copied_files"] == 2 and len(warm["evidence"]["warm_s"]) == 2
    cold = by(results, tier="home", cache="cold")  # allow_actions given as false, as the role gives it
    assert cold["status"] == "skip" and "clustereval_lifecycle_allow_actions=false" in cold["summary"]
    assert by(results, tier="gone", cache="warm")["status"] == "skip"
    assert sorted(p.name for p in (tmp_path / "tiers").iterdir()) == ["a"]  # every copy removed


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare (mounts)")
@pytest.mark.parametrize("writable", [False, True])
def test_the_cold_import_drops_the_page_cache_only_when_allowed_and_says_when_it_cannot(tmp_path, fake_torch,
                                                                                      writable):
    # /proc/sys/vm/drop_caches is a file of the test's own here (a bind mount in a private mount namespace): the
    # probe writes it as it would the kernel's, and nothing else on the machine is disturbed.
    stand_in = tmp_path / "drop_caches"
    stand_in.write_text("0\n")
    script = tmp_path / "probe.sh"
    script.write_text(PROBES["lifecycle_import_torch"]["cmd"])
    ro = "" if writable else "mount -o remount,bind,ro /proc/sys/vm/drop_caches && "
    wrap = f"mount --bind {stand_in} /proc/sys/vm/drop_caches && {ro}exec /bin/sh {script}"
    env = {**os.environ, **import_env(tmp_path, fake_torch, CLUSTEREVAL_ALLOW_ACTIONS="1")}
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "/bin/sh", "-c", wrap], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr[-1000:]
    options = {"tiers": [{"name": "home", "path": "~"}]}
    cold = by(judge("lifecycle.import.torch", record("lifecycle_import_torch", proc.stdout), **options),
              tier="home", cache="cold")
    if writable:
        assert cold["status"] == "pass" and stand_in.read_text().strip() == "3"
    else:
        assert cold["status"] == "skip" and "could not drop the page cache (needs root)" in cold["summary"]


def test_the_clean_up_removes_every_tier_s_work_directory(tmp_path):
    home, scratch = tmp_path / "home", tmp_path / "scratch"
    work = "clustereval-lifecycle-run1-n1"
    for base in (home, scratch):
        (base / work / "pip-venv" / "bin").mkdir(parents=True)
    (home / "keep").mkdir()
    env = {"HOME": str(home), "TMPDIR": str(tmp_path), "CLUSTEREVAL_WORKNAME": work,
           "CLUSTEREVAL_TIERS": f"home=~\nscratch={scratch}\n"}
    (tmp_path / f"{work}-uv").mkdir()
    assert PROBES["lifecycle_install"]["cleanup"] == PROBES["lifecycle_import_torch"]["cleanup"]
    run_probe("lifecycle_install", env, cmd=PROBES["lifecycle_install"]["cleanup"])
    assert sorted(p.name for p in home.iterdir()) == ["keep"] and list(scratch.iterdir()) == []
    assert not (tmp_path / f"{work}-uv").exists()
    # A name that is not the run's own removes nothing.
    (scratch / "precious").mkdir()
    run_probe("lifecycle_install", {**env, "CLUSTEREVAL_WORKNAME": ""}, cmd=PROBES["lifecycle_install"]["cleanup"])
    assert (scratch / "precious").is_dir()


SECRET = "CANARY-lifecycle-4f2a"


def test_index_url_credentials_reach_no_file_of_the_run_directory(tmp_path):
    # What a tool prints about a credentialed URL is blanked by the probe itself (its `last` helper)...
    log = tmp_path / "pip.log"
    log.write_text(f"Looking in indexes: https://mirror-user:{SECRET}@mirror.example/simple\n"
                   f"ERROR: HTTP error 401 while getting https://mirror-user:{SECRET}@mirror.example/simple/rich/\n")
    helper = next(line for line in PROBES["lifecycle_install"]["cmd"].splitlines() if line.startswith("last()"))
    said = subprocess.run(["/bin/sh", "-c", f'{helper}\nlast "$1"', "sh", str(log)], capture_output=True, text=True,
                          check=True).stdout
    assert SECRET not in said and "mirror-user" not in said and "https://<redacted>@mirror.example" in said
    # ... and the probe's params and command are redacted in raw/*.meta.json; its stdout is kept as printed.
    url = f"https://mirror-user:{SECRET}@mirror.example/simple"
    probe = {"name": "lifecycle_install", "cmd": PROBES["lifecycle_install"]["cmd"], "rc": 0, "duration_s": 3.0,
             "stdout": f"install tier=home installer=pip stage=install rc=1 reason={said.strip()}\n", "stderr": "",
             "artifact": "lifecycle-install.txt", "params": {"index_url": url, "tiers": "home=~\n"}}
    kept = rundir.keep_probe_outputs(str(tmp_path / "run"), "n1", {"lifecycle_install": probe})
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert len(files) == 2 and all(SECRET not in p.read_text() for p in files)
    meta = json.loads(Path(tmp_path / "run" / (kept["lifecycle_install"]["artifact"] + ".meta.json")).read_text())
    assert meta["params"]["index_url"] == "https://<redacted>@mirror.example/simple"
    # ... and the checks' own evidence names the index without them.
    result = by(judge("lifecycle.install.packages", record("lifecycle_install", install_output()), index_url=url),
                tier="home", installer="pip")
    assert SECRET not in json.dumps(result) and result["evidence"]["sources"] == \
        "index https://<redacted>@mirror.example/simple"
