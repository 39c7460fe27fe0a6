"""The lifecycle role end to end on a simulated cluster of two nodes (``--tags lifecycle``, performance phase).

Measured for real on every node and tier (home, scratch): pip installing one tiny package from a package index
this test serves on 127.0.0.1 (its URL carries a canary password, which must reach no file of the run directory
and not the output), and ``import torch`` from a copy of the project's own environment (torch 2.13.0 CPU; the
generated inventory points ``clustereval_gpu_compute_venv`` at it). WAN endpoints: the test's own server
(download and upload, measured), a host that never resolves (``.invalid``) and a closed port marked required
(skip and fail, with the reasons, in seconds); models from hubs that never resolve (skips); vLLM is not installed
(skip); those four are measured on the one host the generated inventory samples. Nothing the probes created is
left on the nodes.

Needs root and Debian's slurm-wlm, munge and openssh-server (``make install``).
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import threading
import time
import zipfile
from pathlib import Path
from typing import ClassVar

import pytest

from tests.integration.simrun import REQUIRES_SIM, load_result_list, run_playbook, simulated_cluster

pytestmark = REQUIRES_SIM

SECRET = "CANARY-lifecycle-index-9c3e71"
WHEEL = "clustereval_tiny-1.0-py3-none-any.whl"
BLOB = 2_000_000


def tiny_wheel() -> bytes:
    """A pure-Python wheel of one module: the smallest real install pip can do."""
    files = {"clustereval_tiny/__init__.py": b"VALUE = 1\n",
             "clustereval_tiny-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: clustereval-tiny\n"
                                                        b"Version: 1.0\n",
             "clustereval_tiny-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: clustereval-test\n"
                                                     b"Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for path, data in files.items())
    files["clustereval_tiny-1.0.dist-info/RECORD"] = (record + "clustereval_tiny-1.0.dist-info/RECORD,,\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return buffer.getvalue()


class Index(http.server.BaseHTTPRequestHandler):
    """A PEP 503 index of the tiny wheel, a blob to download and a sink to upload to."""

    wheel = b""
    seen_credentials: ClassVar[list[str]] = []

    def _send(self, status: int, body: bytes, kind: str = "text/html") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.headers.get("Authorization"):
            Index.seen_credentials.append(self.headers["Authorization"])
        if self.path.rstrip("/") == "/simple":
            self._send(200, b'<a href="clustereval-tiny/">clustereval-tiny</a>')
        elif self.path.rstrip("/") == "/simple/clustereval-tiny":
            self._send(200, f'<a href="/files/{WHEEL}">{WHEEL}</a>'.encode())
        elif self.path == f"/files/{WHEEL}":
            self._send(200, self.wheel, "application/octet-stream")
        elif self.path == "/blob":
            self._send(200, b"\0" * BLOB, "application/octet-stream")
        else:
            self._send(404, b"not here")

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(200, b"ok", "text/plain")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    Index.wheel = tiny_wheel()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    tmp = tmp_path_factory.mktemp("lifecycle")
    settings = {
        "clustereval_lifecycle_packages": ["clustereval-tiny"],
        "clustereval_lifecycle_index_url": base.replace("http://", f"http://lifecycle-user:{SECRET}@") + "/simple/",
        "clustereval_lifecycle_import_repeats": 1,
        # both tiers (the simulated inventory measures scratch alone)
        "clustereval_lifecycle_tiers": [{"name": "home", "path": "~"}, {"name": "scratch", "path": "/sim/scratch"}],
        "clustereval_lifecycle_connect_timeout_s": 3,
        "clustereval_lifecycle_endpoints": [
            {"name": "huggingface", "url": "https://huggingface.invalid/openai-community/gpt2/resolve/main/"
                                           "model.safetensors", "kind": "download", "bytes": 100_000_000},
            {"name": "local", "url": f"{base}/blob", "kind": "download", "bytes": BLOB},
            {"name": "local", "url": f"{base}/up", "kind": "upload", "bytes": BLOB},
            {"name": "closed", "url": "http://127.0.0.1:9/", "kind": "download", "bytes": 1000, "required": True}],
        "clustereval_lifecycle_models": [
            {"name": "gpt2", "hub": "huggingface", "repo": "openai-community/gpt2", "revision": "main",
             "files": ["config.json", "model.safetensors"]},
            {"name": "qwen2.5-0.5b-instruct", "hub": "modelscope", "repo": "Qwen/Qwen2.5-0.5B-Instruct",
             "revision": "master", "files": ["config.json", "model.safetensors"]}],
        "clustereval_lifecycle_hf_endpoint": "https://huggingface.invalid",
        "clustereval_lifecycle_modelscope_endpoint": "https://modelscope.invalid",
    }
    varfile = tmp / "vars.json"
    varfile.write_text(json.dumps(settings))
    sim, run_dir = tmp / "sim", tmp / "run"
    try:
        with simulated_cluster(sim, 2, "reference"):
            started = time.monotonic()
            proc = run_playbook(sim / "inventory.ini", "--tags", "lifecycle", "-e", "clustereval_phases=performance",
                                "-e", f"@{varfile}", "-e", f"clustereval_out={run_dir}", timeout=600)
            elapsed = time.monotonic() - started
            assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
            nodes = sim / "nodes"
            left = [str(p) for node in ("node1", "node2")
                    for where in (nodes / node / "root" / "scratch", nodes / node / "overlay" / "root")
                    if where.is_dir() for p in where.glob("clustereval-lifecycle-*")]
            left += [str(p) for p in Path("/tmp").glob("clustereval-lifecycle-*")
                     if json.loads((run_dir / "run.json").read_text())["run_id"] in p.name]
    finally:
        httpd.shutdown()
    return {"dir": run_dir, "items": load_result_list(run_dir), "proc": proc, "left": left, "elapsed": elapsed}


def pick(items: list[dict], check: str, subject: str | None = None, **params) -> list[dict]:
    return [r for r in items if r["check"] == check and (subject is None or r["subject"] == subject)
            and all(r.get("params", {}).get(k) == v for k, v in params.items())]


def test_pip_installs_for_real_on_every_node_and_tier(run):
    for node in ("node1", "node2"):
        for tier in ("home", "scratch"):
            [pip] = pick(run["items"], "lifecycle.install.packages", node, tier=tier, installer="pip")
            assert pip["status"] in ("pass", "warn"), pip["summary"]
            assert pip["value"] > 0 and pip["unit"] == "s" and "installed 1 package into a fresh venv" in pip["summary"]
            assert pip["evidence"]["fstype"] and pip["expected"]["max"] == 30
            [uv] = pick(run["items"], "lifecycle.install.packages", node, tier=tier, installer="uv")
            assert uv["status"] in ("pass", "warn", "skip"), uv["summary"]  # uv where the node has it
            if uv["status"] == "skip":
                assert "uv is not installed on the node" in uv["summary"]
    assert Index.seen_credentials  # pip did use the credentials of the index URL ...


def test_the_index_credentials_reach_no_file_of_the_run_and_not_the_output(run):
    hits = [str(p) for p in run["dir"].rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert hits == []  # ... and nothing of the run directory holds them
    assert SECRET not in run["proc"].stdout + run["proc"].stderr
    meta = json.loads((run["dir"] / "raw/node1/lifecycle-install.txt.meta.json").read_text())
    assert "<redacted>@127.0.0.1" in meta["params"]["index_url"]


def test_import_torch_is_timed_warm_on_every_tier_and_cold_says_it_was_not_allowed(run):
    for node in ("node1", "node2"):
        for tier in ("home", "scratch"):
            [warm] = pick(run["items"], "lifecycle.import.torch", node, tier=tier, cache="warm")
            assert warm["status"] in ("pass", "warn", "fail"), warm["summary"]
            assert warm["value"] > 0.2 and "warm only" in warm["summary"] and "2.13.0" in warm["summary"]
            assert warm["evidence"]["copied_files"] > 1000
            [cold] = pick(run["items"], "lifecycle.import.torch", node, tier=tier, cache="cold")
            assert cold["status"] == "skip" and "clustereval_lifecycle_allow_actions=false" in cold["summary"]


def test_wan_endpoints_measure_what_answers_and_skip_or_fail_what_cannot_be_reached(run):
    sampled = ("lifecycle.wan.transfer", "lifecycle.container.pull", "lifecycle.model.download",
               "lifecycle.serve.ready")
    # The generated inventory samples one host (clustereval_lifecycle_sample_hosts: 1): node2 measures none of them.
    assert [r for r in run["items"] if r["check"] in sampled and r["subject"] == "node2"] == []
    for node in ("node1",):
        [down] = pick(run["items"], "lifecycle.wan.transfer", node, endpoint="local", direction="download")
        assert down["status"] == "pass" and down["evidence"]["bytes"] == BLOB
        [up] = pick(run["items"], "lifecycle.wan.transfer", node, endpoint="local", direction="upload")
        assert up["status"] == "pass" and up["evidence"]["bytes"] == BLOB
        [hf] = pick(run["items"], "lifecycle.wan.transfer", node, endpoint="huggingface")
        assert hf["status"] == "skip" and "Could not resolve host: huggingface.invalid" in hf["summary"]
        [closed] = pick(run["items"], "lifecycle.wan.transfer", node, endpoint="closed")
        assert closed["status"] == "fail" and "is required" in closed["summary"]
        models = pick(run["items"], "lifecycle.model.download", node)
        assert len(models) == 2
        for model in models:
            assert model["status"] == "skip" and "Could not resolve host" in model["summary"]
        [serve] = pick(run["items"], "lifecycle.serve.ready", node)
        assert serve["status"] == "skip" and "vllm is not installed on the node" in serve["summary"]
        [pull] = pick(run["items"], "lifecycle.container.pull", node)
        assert pull["status"] != "error", pull["summary"]  # the node's enroot (the simulation's)


def test_nothing_is_left_on_the_nodes_and_the_run_stays_short(run):
    assert run["left"] == []
    assert {r["status"] for r in run["items"] if r["check"].startswith("lifecycle.")} <= {"pass", "warn", "fail",
                                                                                           "skip"}
    assert run["elapsed"] < 240, f"the lifecycle run took {run['elapsed']:.0f} s"
