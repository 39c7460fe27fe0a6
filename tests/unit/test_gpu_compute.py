"""gpu_compute checks on the benchmark's JSON lines: real output of the script on this CPU, and lines written
the way it writes them for eight GPUs (its emit format), so every status of every check is shown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clustereval import checks, parsers
from clustereval.checks import Context
from tests.conftest import read_corpus
from tests.helpers import RUN

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "roles/gpu_compute/files/clustereval_gpu_bench.py"
H100 = "NVIDIA H100 80GB HBM3"
TINY = ["--warmup", "1", "--iters", "2", "--gemm-shape", "256x256x256", "--mamf-m", "128,256", "--mamf-n", "256",
        "--mamf-k", "256", "--gemv-shape", "2048x512", "--moe-models", "tiny:256:64:4:2", "--moe-tokens", "8",
        "--copy-mib", "4", "--flush-mib", "4"]


@pytest.fixture(scope="module")
def cpu_output() -> str:
    proc = subprocess.run([sys.executable, str(SCRIPT), *TINY], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def line(event: str, **fields) -> str:
    return json.dumps({"event": event, **fields})


def gpu_run(values: dict[int, float], bench: str = "gemm", model: str = H100, extra: list[str] = (),
            done: bool = True, backend: str = "cuda") -> str:
    devices = [{"index": i, "name": model, "device": f"cuda:{i}"} for i in range(max(values) + 1)]
    out = [line("start", tool="clustereval-gpu-bench", version=1, torch="2.13.0+cu130", cuda="13.0", hip=None,
                backend=backend, mode="one_at_a_time", host="n1", devices=devices, settings={"benches": bench})]
    for gpu, value in values.items():
        if bench == "gemm":
            out.append(line("result", gpu=gpu, bench="gemm", dtype="bf16", m=8192, n=8192, k=8192, iters=50,
                            tflops=value, max_tflops=value * 1.01))
        elif bench == "mamf":
            out.append(line("result", gpu=gpu, bench="mamf", dtype="bf16", shapes=2, max_tflops=value,
                            median_tflops=value * 0.9, best_shape=[8192, 8192, 8192],
                            points=[[4096, 4096, 4096, value * 0.9], [8192, 8192, 8192, value]]))
        else:
            out.append(line("result", gpu=gpu, bench="copy", direction="h2d", bytes=2**30, gbps=value))
    out += list(extra)
    if done:
        out.append(line("done", duration_s=12.5))
    return "\n".join(out) + "\n"


def probe(stdout: str, rc: int = 0, **extra) -> dict:
    return {"name": "gpu_bench", "cmd": "python clustereval_gpu_bench.py", "rc": rc, "stdout": stdout, "stderr": "",
            "parser": "clustereval-gpu-bench", "artifact": "gpu-bench.jsonl", "on_timeout": "fail", "timeout": 60,
            **extra}


def judge(check_id: str, stdout: str, facts: dict | None = None, host_probes: dict | None = None, **probe_extra):
    ctx = Context(subject="n1", probes={"gpu_bench": probe(stdout, **probe_extra)},
                  facts={"gpu_model": H100, "gpu_count": 8, **(facts or {})}, params={"mode": "one_at_a_time"},
                  host_probes=host_probes or {})
    return checks.evaluate_many(check_id, ctx, RUN)


def by_subject(results: list[dict]) -> dict[str, dict]:
    return {r["subject"]: r for r in results}


# ------------------------------------------------------------------------------------------------ the parser


def test_the_scripts_real_output_on_this_cpu_parses_whole(cpu_output):
    data = parsers.parse("clustereval-gpu-bench", cpu_output)
    assert data["complete"] and data["backend"] == "cpu" and data["devices"][0]["device"] == "cpu"
    benches = {r["bench"] for r in data["results"]}
    assert benches == {"gemm", "mamf", "gemv", "grouped_gemm", "copy"}
    assert {s["dtype"] for s in data["skips"] if s["bench"] == "gemm"} >= {"tf32", "mxfp8", "nvfp4"}
    mamf = next(r for r in data["results"] if r["bench"] == "mamf")
    assert mamf["shapes"] == 2 and mamf["max_tflops"] == max(p[3] for p in mamf["points"])


def test_a_run_cut_mid_line_keeps_every_whole_line_and_says_it_is_incomplete(cpu_output):
    whole = parsers.parse("clustereval-gpu-bench", cpu_output)
    cut = cpu_output[: cpu_output.rindex('{"event": "result"') + 25]
    data = parsers.parse("clustereval-gpu-bench", cut)
    assert not data["complete"] and len(data["results"]) == len(whole["results"]) - 1
    assert any("not a benchmark record" in w for w in data["warnings"])


def test_output_that_is_not_the_benchmarks_raises_parse_error():
    with pytest.raises(parsers.ParseError):
        parsers.parse("clustereval-gpu-bench", "Traceback (most recent call last):\n  boom\n")
    with pytest.raises(parsers.ParseError):
        parsers.parse("clustereval-gpu-bench", line("start", tool="something-else") + "\n")


def test_a_result_with_a_nonsense_number_is_dropped_with_a_warning():
    text = gpu_run({0: 700.0}).replace('"tflops": 700.0', '"tflops": "fast"')
    data = parsers.parse("clustereval-gpu-bench", text)
    assert data["results"] == [] and any("tflops is not a non-negative number" in w for w in data["warnings"])


# ------------------------------------------------------------------------------------------------ per-GPU checks


def test_eight_healthy_h100s_pass_against_the_h100_reference():
    results = judge("gpu.compute.gemm", gpu_run({i: 760.0 + i for i in range(8)}))
    assert len(results) == 8 and {r["status"] for r in results} == {"pass"}
    first = by_subject(results)["n1/gpu0"]
    assert first["params"] == {"mode": "one_at_a_time", "dtype": "bf16", "shape": "8192x8192x8192"}
    assert first["expected"]["reference"] == 794.5 and "stas00" in first["expected"]["source"]
    assert first["evidence"]["node_median"] == pytest.approx(763.5)


def test_a_gpu_below_the_floor_fails_and_one_below_the_warn_level_warns():
    values = {i: 760.0 for i in range(8)} | {3: 560.0, 5: 660.0}
    results = by_subject(judge("gpu.compute.gemm", gpu_run(values)))
    assert results["n1/gpu3"]["status"] == "fail" and "below the fail level" in results["n1/gpu3"]["summary"]
    assert results["n1/gpu5"]["status"] == "warn" and "straggler" in results["n1/gpu5"]["summary"]
    assert results["n1/gpu0"]["status"] == "pass"


def test_a_straggler_above_the_floor_is_named_against_its_node_median():
    values = {i: 790.0 for i in range(8)} | {6: 720.0}  # above the 675 warn level, 9% below its neighbours
    results = by_subject(judge("gpu.compute.gemm", gpu_run(values)))
    assert results["n1/gpu6"]["status"] == "warn"
    assert "a straggler: 8.9% below the node's median 790" in results["n1/gpu6"]["summary"]
    assert results["n1/gpu6"]["evidence"]["ratio_to_node_median"] == pytest.approx(0.9114, abs=1e-3)


def test_an_unknown_gpu_is_judged_against_its_peers_and_says_so():
    results = by_subject(judge("gpu.compute.gemm", gpu_run({i: 180.0 for i in range(4)} | {2: 150.0},
                                                          model="NVIDIA L40S")))
    assert results["n1/gpu0"]["status"] == "pass" and "no reference for NVIDIA L40S" in results["n1/gpu0"]["summary"]
    assert results["n1/gpu2"]["status"] == "fail"  # 17% below its peers


def test_mamf_is_judged_on_the_max_over_shapes_and_keeps_every_shape_as_a_series():
    results = by_subject(judge("gpu.compute.mamf", gpu_run({0: 790.0, 1: 700.0}, bench="mamf")))
    assert results["n1/gpu0"]["status"] == "pass" and results["n1/gpu0"]["value"] == 790.0
    assert results["n1/gpu1"]["status"] == "warn"  # 700 < 0.93 x 794.5
    assert results["n1/gpu0"]["series"][0]["path"] == "series/n1/gpu-mamf.csv"
    assert len(results["n1/gpu0"]["series"][0]["data"]) == 2


def test_a_dtype_the_chip_lacks_is_a_skip_saying_why_and_a_cuda_fault_is_a_fail():
    extra = [line("skip", gpu=0, bench="gemm", dtype="nvfp4", reason="NVFP4 block-scaled tensor cores need compute "
                  "capability 10.0 (Blackwell); this GPU is 9.0"),
             line("error", gpu=1, bench="gemm", message="RuntimeError: CUDA error: an illegal memory access was "
                  "encountered"),
             line("error", gpu=2, bench="gemm", message="ValueError: bad shape")]
    results = judge("gpu.compute.gemm", gpu_run({0: 760.0, 1: 760.0}, extra=extra))
    by_status = {r["status"]: r for r in results if r["params"].get("dtype") != "bf16" or r["status"] != "pass"}
    assert by_status["skip"]["params"]["dtype"] == "nvfp4" and "Blackwell" in by_status["skip"]["summary"]
    assert by_status["fail"]["subject"] == "n1/gpu1" and "the GPU failed during" in by_status["fail"]["summary"]
    assert by_status["error"]["subject"] == "n1/gpu2" and "the harness failed" in by_status["error"]["summary"]


def test_a_hung_benchmark_fails_with_its_last_lines():
    results = judge("gpu.compute.gemm", gpu_run({0: 760.0}, done=False), timed_out=True)
    assert results[0]["status"] == "fail" and "a hang" in results[0]["summary"]
    assert results[0]["evidence"]["last_lines"]


def test_unusable_output_is_a_harness_error_and_a_missing_python_a_skip():
    assert judge("gpu.compute.gemm", "Segmentation fault\n", rc=139)[0]["status"] == "error"
    skipped = judge("gpu.compute.gemm", "", rc=127, missing=True)[0]
    assert skipped["status"] == "skip" and "gpu.compute.torch_env" in skipped["summary"]


def test_the_cpu_run_passes_on_sanity_and_says_it_ran_on_the_cpu(cpu_output):
    results = judge("gpu.compute.gemm", cpu_output)
    ran = [r for r in results if r["status"] == "pass"]
    assert ran and all("on the CPU (no GPU visible to PyTorch)" in r["summary"] for r in ran)
    assert all(r["expected"] is None for r in ran)
    assert {r["params"]["dtype"] for r in results if r["status"] == "skip"} >= {"tf32", "mxfp8", "nvfp4"}
    copies = judge("gpu.compute.copy", cpu_output)
    assert {r["params"]["direction"]: r["status"] for r in copies} == {"d2d": "pass", "h2d": "skip", "d2h": "skip"}


def test_a_bench_not_asked_for_is_a_skip():
    results = judge("gpu.compute.gemv", gpu_run({0: 760.0}))
    assert results[0]["status"] == "skip" and "not asked for" in results[0]["summary"]


# ------------------------------------------------------------------------------------------------ device and env


def test_pytorch_seeing_fewer_gpus_than_the_driver_fails_and_a_cpu_build_warns(cpu_output):
    assert judge("gpu.compute.device", gpu_run({i: 760.0 for i in range(8)}))[0]["status"] == "pass"
    fewer = judge("gpu.compute.device", gpu_run({i: 760.0 for i in range(7)}))[0]
    assert fewer["status"] == "fail" and "sees 7 of the 8 GPUs" in fewer["summary"]
    cpu = judge("gpu.compute.device", cpu_output)[0]
    assert cpu["status"] == "warn" and "CPU build" in cpu["summary"]
    blind = gpu_run({0: 1.0}, backend="cpu")  # a CUDA build that found no GPU
    assert judge("gpu.compute.device", blind)[0]["status"] == "fail"
    assert judge("gpu.compute.device", cpu_output, facts={"gpu_count": 0})[0]["status"] == "pass"


def _env(stdout: str, rc: int = 0) -> dict:
    ctx = Context(subject="n1", probes={"gpu_torch_env": {"name": "gpu_torch_env", "cmd": "install", "rc": rc,
                                                          "stdout": stdout, "stderr": "", "params": {"venv": "/v"}}})
    return checks.evaluate("gpu.compute.torch_env", ctx, RUN)


def test_the_torch_environment_passes_when_present_and_an_install_failure_is_the_harnesss():
    assert _env("present: torch 2.13.0+cu130 in /v\n")["status"] == "pass"
    failed = _env("ERROR: No matching distribution found for torch==9.9\npip install torch==9.9 failed with status 1\n",
                  rc=2)
    assert failed["status"] == "error" and "No matching distribution" in failed["summary"]


# ------------------------------------------------------------------------------------------------ fleet and nvbandwidth


def fleet(per_host: dict[str, float]) -> list[dict]:
    kept = {h: {"gpu_bench": probe(gpu_run({i: v for i in range(8)}))} for h, v in per_host.items()}
    ctx = Context(subject="_cluster", host_probes=kept, params={"mode": "one_at_a_time"})
    return checks.evaluate_many("gpu.compute.fleet", ctx, RUN)


def test_a_whole_slow_node_is_named_against_the_fleet():
    results = by_subject(fleet({"n1": 760.0, "n2": 765.0, "n3": 762.0, "n4": 650.0}))
    assert results["n4"]["status"] == "fail" and "slower than its peers" in results["n4"]["summary"]
    assert {results[h]["status"] for h in ("n1", "n2", "n3")} == {"pass"}


def test_noise_across_the_fleet_names_no_node_and_two_nodes_cannot_say_which_is_slow():
    noisy = fleet({"n1": 600.0, "n2": 760.0, "n3": 680.0, "n4": 840.0})
    assert {r["status"] for r in noisy} == {"pass"} and "within the fleet's own spread" in " ".join(
        r["summary"] for r in noisy)
    two = fleet({"n1": 760.0, "n2": 500.0})
    assert two[0]["status"] == "skip" and "too few to name a slow one" in two[0]["summary"]


def test_a_node_whose_output_is_unreadable_is_an_error_not_a_slow_node():
    kept = {h: {"gpu_bench": probe(gpu_run({0: 760.0}))} for h in ("n1", "n2", "n3")}
    kept["n4"] = {"gpu_bench": probe("garbage\n")}
    results = checks.evaluate_many("gpu.compute.fleet", Context(subject="_cluster", host_probes=kept), RUN)
    assert [r["status"] for r in results if r["status"] == "error"] == ["error"]


def _nvbandwidth(text: str, facts: dict) -> list[dict]:
    ctx = Context(subject="n1", facts=facts, probes={"gpu_nvbandwidth": {
        "name": "gpu_nvbandwidth", "cmd": "nvbandwidth", "rc": 0, "stdout": text, "stderr": "",
        "parser": "nvbandwidth", "artifact": "nvbandwidth.txt"}})
    return checks.evaluate_many("gpu.compute.nvbandwidth", ctx, RUN)


def test_nvbandwidth_host_links_from_a_real_h800_capture_and_a_slow_link():
    text = read_corpus("nvbandwidth", "h800-x8-v0.2-drv525-all-tests.txt")
    results = _nvbandwidth(text, {"gpu_model": "NVIDIA H800"})
    assert len(results) == 16 and {r["status"] for r in results} == {"pass"}
    assert "no host-link reference for NVIDIA H800" in results[0]["summary"]
    h100 = _nvbandwidth(text, {"gpu_model": H100})
    assert {r["status"] for r in h100} == {"pass"} and h100[0]["expected"]["reference"] == 55.2
    first_row = next(ln for ln in text.splitlines() if ln.startswith("0 ") and "55.28" in ln)
    slow = text.replace(first_row, first_row.replace("55.28", "26.03"), 1)  # GPU 0 at Gen4 speed
    worst = by_subject([r for r in _nvbandwidth(slow, {"gpu_model": H100}) if r["params"]["direction"] == "h2d"])
    assert worst["n1/gpu0"]["status"] == "fail" and "a straggler" in worst["n1/gpu0"]["summary"]


def test_cpu_figures_are_never_compared_across_the_fleet(cpu_output):
    kept = {h: {"gpu_bench": probe(cpu_output)} for h in ("n1", "n2", "n3", "n4")}
    results = checks.evaluate_many("gpu.compute.fleet", Context(subject="_cluster", host_probes=kept), RUN)
    assert [r["status"] for r in results] == ["skip"] and "measured the CPU" in results[0]["summary"]


def test_a_credential_in_the_pip_index_url_never_reaches_the_run_directory(tmp_path):
    from clustereval import rundir

    record = {"name": "gpu_torch_env", "cmd": "install", "rc": 0, "stdout": "present: torch 2.13.0 in /v\n",
              "stderr": "", "params": {"venv": "/v", "index_url": "https://builder:s3cr3tT0ken@pypi.example/simple",
                                       "api_token": "abcdef123456"}}
    rundir.keep_probe_outputs(str(tmp_path), "n1", {"gpu_torch_env": record})
    written = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    assert "s3cr3tT0ken" not in written and "abcdef123456" not in written
    assert "https://<redacted>@pypi.example/simple" in written


def test_rocm_gemms_run_with_tunableop_unless_the_operator_says_otherwise(monkeypatch):
    import importlib.util
    import os
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location("clustereval_gpu_bench_under_test", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    enabled: list[bool] = []
    torch = SimpleNamespace(cuda=SimpleNamespace(tunable=SimpleNamespace(enable=enabled.append)))
    monkeypatch.delenv("PYTORCH_TUNABLEOP_ENABLED", raising=False)
    bench.tunable_op(torch)
    assert os.environ["PYTORCH_TUNABLEOP_ENABLED"] == "1" and enabled == [True]
    monkeypatch.setenv("PYTORCH_TUNABLEOP_ENABLED", "0")  # the operator's own setting wins
    enabled.clear()
    bench.tunable_op(torch)
    assert os.environ["PYTORCH_TUNABLEOP_ENABLED"] == "0" and enabled == []
    assert bench.arguments([]).rocm_tunableop == "on" and bench.arguments(["--rocm-tunableop", "off"]).rocm_tunableop \
        == "off"
