"""Node profiles of the simulated cluster: load the documented YAML and render one state per node.

A profile (``src/clustereval/sim/profiles/NAME.yml`` or any user YAML file, documented in ``docs/sim.md``)
has a ``cluster:`` section with the defaults every node shares (GPU model and count, driver/CUDA versions,
NIC rails, Slurm node shape) and a ``nodes:`` section with per-node overrides and ``faults``, keyed by node
name (``node3``) or 1-based index (``3``). :func:`render_node` turns that into the JSON document the per-node
shims read (``<node root>/node.json``): every GPU with every field the shims print, already resolved.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clustereval import yamldata
from clustereval.sim import amd
from clustereval.sim.keys import known_mapping

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"

# CUDA version the driver reports, per driver branch; used when a node overrides only the driver version.
CUDA_BY_DRIVER_BRANCH = {
    "470": "11.4",
    "510": "11.6",
    "515": "11.7",
    "525": "12.0",
    "530": "12.1",
    "535": "12.2",
    "545": "12.3",
    "550": "12.4",
    "555": "12.5",
    "560": "12.6",
    "565": "12.7",
    "570": "12.8",
    "575": "12.9",
    "580": "13.0",
}

NVIDIA_SMI_MODES = ("ok", "truncated", "garbage", "missing")
KNOWN_FAULTS = {
    "gpu_missing",
    "slurm_state",
    "slurm_reason",
    "unreachable",
    "nvidia_smi",
    "driver_version",
    "cuda_version",
    "gpu_temperature_c",
    "xid",
    "exporters_missing",
    "container_toolkit_version",
    "dcgm_exporter_version",
    "gpu_hot",
    "gpu_throttle",
    "xid_during_run",
    "ecc_growth",
    "clock_loss",
    # fabric and performance faults (rendered into node.json "fabric", read by the nccl-tests, perftest
    # and nvbandwidth shims; see docs/sim.md "Fabric and performance tools")
    *("rail_rate_factor", "nvlink_factor", "straggler_gpu", "nccl_hang", "nccl_jagged", "nccl_wrong",
      "nccl_tests", "perftest", "nvbandwidth"),
    # AMD nodes' TransferBench (sim/shims/transferbench.py): the tool's mode, and GPUs whose PCIe host link is slow
    *("transferbench", "slow_host_link"),
}

# Faults that act while an ``nvidia-smi -l/-lms`` loop runs, relative to the start of each loop process
# (see docs/sim.md and the shim's "loop mode"): the keys each accepts, with the required ones.
RUN_FAULTS = {
    "gpu_hot": ({"gpu", "after_s", "temperature_c", "memory_temperature_c", "sm_clock_mhz"},
                {"gpu", "temperature_c"}),
    "gpu_throttle": ({"gpu", "after_s", "reason", "sm_clock_mhz"}, {"gpu", "reason"}),
    "xid_during_run": ({"gpu", "after_s", "code", "message"}, {"gpu"}),
    "ecc_growth": ({"gpu", "after_s", "corrected_per_min", "uncorrected"}, {"gpu"}),
    "clock_loss": ({"gpu", "after_s", "sm_clock_mhz"}, {"gpu", "sm_clock_mhz"}),
}
# gpu_throttle reasons -> NVML clocks event reason bit (nvml.h nvmlClocksEventReason* / ...ThrottleReason*).
THROTTLE_REASONS = {
    "hw_slowdown": 0x8,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake": 0x80,
    "hw_power_brake_slowdown": 0x80,
}
# At this GPU temperature the GPU shuts down ("GPU Shutdown T.Limit Temp: -8 C" below the 87 C the shim's
# T.Limit counts from): a gpu_hot target must stay below it.
GPU_SHUTDOWN_TEMP_C = 95


class ProfileError(ValueError):
    """A profile that cannot be used. ``problems`` lists every problem found, each naming its YAML path
    (``nodes.node2.gpus.count: must be a whole number >= 0, not -3``); the message lists them all."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]

    @classmethod
    def listing(cls, path: str | Path, problems: list[str]) -> ProfileError:
        """One error for all of a profile's problems: one line when there is one, else one line each."""
        if len(problems) == 1:
            return cls(f"profile {path}: {problems[0]}", problems)
        lines = "".join(f"\n  {problem}" for problem in problems)
        return cls(f"profile {path} has {len(problems)} problems:{lines}", problems)


def available_profiles() -> list[str]:
    """Names of the profiles packaged with clustereval."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yml"))


def profile_path(name_or_path: str | Path) -> Path:
    """Resolve a packaged profile name or a path to a user's YAML file."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yml", ".yaml") or candidate.exists():
        if not candidate.is_file():
            raise ProfileError(f"profile file {candidate} does not exist")
        return candidate.resolve()
    packaged = PROFILE_DIR / f"{name_or_path}.yml"
    if not packaged.is_file():
        raise ProfileError(
            f"unknown profile {name_or_path!r}: not a file and not one of {', '.join(available_profiles())}"
        )
    return packaged


def _read_with_base(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The profile's YAML with the profile it ``extends:`` (a packaged name or a path) merged under it."""
    if path in seen:
        raise ProfileError(f"profile {path} extends itself through {' -> '.join(map(str, seen))}")
    try:
        data = yamldata.load(path.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ProfileError(f"profile {path} is not valid YAML: {exc}") from None
    except OSError as exc:
        raise ProfileError(f"profile {path} cannot be read: {exc.strerror}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"profile {path} must be a mapping with a 'cluster:' key")
    base_name = data.get("extends")
    if not base_name:
        return {**data, "declared_nodes": _declared_nodes(data.get("cluster"))}
    base_ref = Path(str(base_name))
    if not base_ref.is_absolute() and base_ref.suffix in (".yml", ".yaml"):
        base_ref = path.parent / base_ref
    base = _read_with_base(profile_path(base_ref if base_ref.suffix else str(base_name)), (*seen, path))
    for key in ("cluster", "nodes"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise ProfileError(f"profile {path}: '{key}:' must be a mapping")
    merged_cluster = deep_merge(base.get("cluster") or {}, data.get("cluster") or {})
    merged_cluster["name"] = (data.get("cluster") or {}).get("name") or path.stem
    return {"cluster": merged_cluster,
            "nodes": deep_merge(base.get("nodes") or {}, data.get("nodes") or {}),
            "declared_nodes": max(base["declared_nodes"], _declared_nodes(data.get("cluster")))}


def _declared_nodes(cluster: Any) -> int:
    """The node count a ``cluster:`` section declares (``nodes: 4``), 0 when it declares none."""
    size = cluster.get("nodes") if isinstance(cluster, dict) else None
    return size if _is_whole(size) and size > 0 else 0


def load_profile(name_or_path: str | Path, nodes: int | None = None) -> dict[str, Any]:
    """Read and validate a profile; returns ``{"name", "path", "cluster", "nodes", "declared_nodes"}``.

    ``extends: <profile>`` at the top of a profile starts from that profile (packaged name or a path
    relative to this file) and merges this one's ``cluster:`` and ``nodes:`` over it. Every problem is found
    before one :class:`ProfileError` lists them all; given ``nodes`` (the size of the cluster about to start),
    overrides for nodes that cluster does not have are among them (:func:`unknown_node_problems`).
    """
    path = profile_path(name_or_path)
    data = _read_with_base(path)
    if not isinstance(data.get("cluster"), dict):
        raise ProfileError(f"profile {path} needs a 'cluster:' mapping")
    overrides = data.get("nodes") or {}
    if not isinstance(overrides, dict):
        raise ProfileError(f"profile {path}: 'nodes:' must be a mapping keyed by node name or index")
    cluster = data["cluster"]
    profile = {
        "name": str(cluster.get("name") or path.stem),
        "path": str(path),
        "cluster": cluster,
        "nodes": {_node_name(key): override for key, override in overrides.items()},
        # the most nodes this profile, or one it extends, declares (cluster.nodes); see unknown_node_problems
        "declared_nodes": data["declared_nodes"],
    }
    problems = profile_problems(profile)
    if nodes is not None:
        problems += unknown_node_problems(profile, nodes)
    if problems:
        raise ProfileError.listing(path, problems)
    return profile


def _node_name(key: Any) -> str:
    """The node a ``nodes:`` key means: a 1-based index (``3``, ``"3"``) is ``node3``, a name is itself."""
    if (isinstance(key, int) and not isinstance(key, bool)) or str(key).isdigit():
        return f"node{int(key)}"
    return str(key)


def profile_problems(profile: dict[str, Any]) -> list[str]:
    """Every problem of a loaded profile, each starting with its YAML path (``nodes.node2.gpus.count: ...``).

    Node names are checked for their form only: which nodes exist depends on the size of the cluster
    (:func:`unknown_node_problems`), and what only a rendered node shows is :func:`render_node`'s to find.
    """
    problems = list(section_problems("cluster", profile["cluster"], node_level=False))
    for name, override in profile["nodes"].items():
        problems += node_override_problems(name, override)
    problems += k8s_api_problems(profile)
    # An area's check that crashes on a value already refused above has nothing to add.
    problems += area_problems(profile, report_crashes=not problems)
    return problems


def unknown_node_problems(profile: dict[str, Any], count: int) -> list[str]:
    """Overrides for nodes beyond the larger of ``count`` and the profile's declared size: packaged profiles
    describe node4 of their 4-node cluster while tests start 3 nodes, but an override for a node neither has
    would be silently ignored."""
    last = max(count, profile.get("declared_nodes", _declared_nodes(profile["cluster"])))
    have = "node1" if last == 1 else f"node1..node{last}"
    return [f"nodes.{name}: no such node: the cluster has {have}" for name in profile["nodes"]
            if NODE_NAME.fullmatch(name) and int(name.removeprefix("node")) > last]


def section_problems(where: str, section: dict[str, Any], node_level: bool) -> Iterator[str]:
    """What is wrong in the cluster defaults or in one node's overrides (the same keys, bar the cluster-wide ones)."""
    yield from schema_problems(where, section, NODE_SCHEMA if node_level else CLUSTER_SCHEMA)
    yield from provider_problems(f"{where}.provider", section.get("provider"), node_level)
    yield from slurm_problems(where, section, node_level)


def node_override_problems(name: str, override: Any) -> Iterator[str]:
    """What is wrong with one ``nodes:`` entry: its name, its settings and its faults."""
    where = f"nodes.{name}"
    if not NODE_NAME.fullmatch(name):
        yield f"{where}: no such node: nodes are named node1, node2, ... (or keyed 1, 2, ...)"
    if not isinstance(override, dict):
        yield f"{where}: expected a mapping, not {override!r}"
        return
    yield from section_problems(where, override, node_level=True)
    yield from fault_problems(f"{where}.faults", override.get("faults"))


def fault_problems(where: str, faults: Any) -> Iterator[str]:
    """Unknown faults, malformed faults during a run, bad ``nvidia_smi`` modes and values of the wrong type."""
    if faults is None:
        return
    if not isinstance(faults, dict):
        yield f"{where}: expected a mapping, not {faults!r}"
        return
    from clustereval.sim import diskfaults, netfaults, overlays, sharedfs

    known = KNOWN_FAULTS | overlays.faults() | sharedfs.FAULTS | netfaults.FAULTS | diskfaults.FAULTS
    unknown = set(faults) - known
    if unknown:
        yield f"{where} has unknown keys {sorted(unknown, key=str)}; known: {sorted(known)}"
    yield from diskfaults.problems(where, faults)
    for fault, (allowed, required) in RUN_FAULTS.items():
        if fault in faults:
            yield from _run_fault_problems(f"{where}.{fault}", faults[fault], allowed, required)
    if faults.get("nvidia_smi", "ok") not in NVIDIA_SMI_MODES:
        yield f"{where}.nvidia_smi must be one of {NVIDIA_SMI_MODES}"
    yield from schema_problems(where, faults, FAULTS_SCHEMA)


def k8s_api_problems(profile: dict[str, Any]) -> Iterator[str]:
    """Provider automation on Kubernetes needs the simulated Kubernetes API (``cluster.k8s.enabled``)."""
    cluster = profile["cluster"]
    if _mapping(cluster.get("k8s")).get("enabled"):
        return
    wants_k8s = [f"nodes.{n}.provider.k8s" for n, o in profile["nodes"].items()
                 if _mapping(_mapping(o).get("provider")).get("k8s")]
    if _mapping(cluster.get("provider")).get("k8s"):
        wants_k8s.insert(0, "cluster.provider.k8s")
    for where in wants_k8s:
        yield (f"{where} needs the simulated Kubernetes API "
               "(cluster: {k8s: {enabled: true}}, e.g. extends: k8s-reference)")


def area_problems(profile: dict[str, Any], report_crashes: bool = True) -> Iterator[str]:
    """What an overlay area cannot show (its ``validate_settings``: unknown keys, versions without
    real output), for the cluster defaults and for every node the profile names."""
    from clustereval.sim import overlays

    checks = [module.validate_settings for module in overlays.areas() if hasattr(module, "validate_settings")]
    for where, settings in [("cluster", {**profile["cluster"], "faults": {}}),
                            *((f"nodes.{n}", node_settings(profile, n)) for n, o in profile["nodes"].items()
                              if isinstance(o, dict))]:
        for validate in checks:
            yield from check_problems(where, validate, settings, refusal=ValueError, report_crashes=report_crashes)


# What a check raises when it trips over a value of the wrong shape, besides the refusals it raises on purpose.
CHECK_CRASHES = (ValueError, TypeError, KeyError, IndexError, AttributeError)


def check_problems(where: str, check: Callable[..., Any], *args: Any, refusal: type[Exception] = ProfileError,
                   report_crashes: bool = True) -> list[str]:
    """``check(*args)``'s refusal (a ``refusal``) as a problem of ``where``; a crash on a value of the wrong
    shape too, with its exception's name, unless ``report_crashes`` is false."""
    try:
        check(*args)
    except refusal as exc:
        return [f"{where}: {exc}"]
    except CHECK_CRASHES as exc:
        return [f"{where}: {type(exc).__name__}: {exc}"] if report_crashes else []
    return []


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a mapping, else an empty one (its wrong type is reported where it is checked)."""
    return value if isinstance(value, dict) else {}


def _run_fault_entries(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _run_fault_problems(where: str, value: Any, allowed: set[str], required: set[str]) -> Iterator[str]:
    """What is malformed in a mid-run fault (a mapping, or a list of mappings), naming the key."""
    entries = _run_fault_entries(value)
    if not entries or not all(isinstance(entry, dict) for entry in entries):
        yield f"{where} must be a mapping (or a list of mappings) with keys {sorted(allowed)}"
        return
    for entry in entries:
        unknown, missing = set(entry) - allowed, required - set(entry)
        if unknown:
            yield f"{where}: unknown keys {sorted(unknown, key=str)}"
        if missing:
            yield f"{where}: missing keys {sorted(missing)}"
        for name in ("gpu", "code", "sm_clock_mhz", "uncorrected"):
            if name in entry:
                yield from _number_problems(f"{where}.{name}", entry[name], integer=True)
        for name in ("after_s", "temperature_c", "memory_temperature_c", "corrected_per_min"):
            if name in entry:
                yield from _number_problems(f"{where}.{name}", entry[name])
        if "reason" in entry and not (isinstance(entry["reason"], str) and entry["reason"] in THROTTLE_REASONS):
            yield f"{where}.reason must be one of {sorted(THROTTLE_REASONS)}"
        if _is_number(entry.get("temperature_c")) and entry["temperature_c"] >= GPU_SHUTDOWN_TEMP_C:
            yield (f"{where}.temperature_c must stay below {GPU_SHUTDOWN_TEMP_C} C, where the GPU "
                   "shuts down (model that with xid_during_run: {code: 79})")
        if "message" in entry and not isinstance(entry["message"], str):
            yield f"{where}.message must be a string"


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``override`` merged in recursively (override wins)."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def node_settings(profile: dict[str, Any], node: str) -> dict[str, Any]:
    """The cluster defaults with this node's overrides merged in (``faults`` always present)."""
    override = profile["nodes"].get(node, {})
    settings = deep_merge(profile["cluster"], {k: v for k, v in override.items() if k != "faults"})
    settings["faults"] = copy.deepcopy(override.get("faults") or {})
    return settings


def _digest(*parts: object) -> str:
    return hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()


def gpu_uuid(cluster: str, node: str, index: int) -> str:
    """Deterministic ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` for (cluster, node, physical index)."""
    h = _digest("uuid", cluster, node, index)
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def gpu_serial(cluster: str, node: str, index: int) -> str:
    """Deterministic 13-digit board serial like the real ``1650124031592``."""
    return "165" + str(int(_digest("serial", cluster, node, index)[:12], 16) % 10**10).zfill(10)


def gres_type(model: str) -> str:
    """Slurm GRES type from the GPU model name: ``NVIDIA H100 80GB HBM3`` -> ``h100``."""
    words = [w for w in model.split() if w.upper() not in ("NVIDIA", "TESLA", "GEFORCE", "RTX")]
    if not words:
        return "gpu"
    # sites name the type after the chip: "A100-SXM4-80GB" -> "a100", "H100" -> "h100"
    chip = re.match(r"[a-z]+\d+", words[0].lower())
    return chip.group(0) if chip else words[0].lower().replace("-", "_")


def _per_gpu(value: Any, index: int, default: Any) -> Any:
    """Per-GPU value from a scalar, a list (by index) or a mapping (by index)."""
    if isinstance(value, dict):
        return value.get(index, value.get(str(index), default))
    if isinstance(value, list):
        return value[index] if index < len(value) else default
    return default if value is None else value


def _host_cpus() -> int:
    """The CPUs this machine really has: every simulated node runs on them."""
    return os.cpu_count() or 1


def _host_memory_mb() -> int:
    """RealMemory a careful admin declares for this machine: MemTotal less 5% for the OS."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(int(line.split()[1]) / 1024 * 0.95)
    except (OSError, ValueError, IndexError):
        pass
    return 1024


def render_node(profile: dict[str, Any], node: str) -> dict[str, Any]:
    """The complete state of one simulated node, as the shims read it from ``node.json``.

    ``gpus`` lists the GPUs the driver sees (``gpu_missing`` ones removed and the rest renumbered, as the
    real driver does); ``slurm.gres_count`` is what Slurm is configured for, which may differ.
    """
    settings = node_settings(profile, node)
    faults = settings["faults"]
    gpu_cfg = settings.get("gpus") or {}
    driver = str(faults.get("driver_version") or settings.get("driver_version") or "550.90.07")
    cuda = str(
        faults.get("cuda_version")
        or (
            settings.get("cuda_version")
            if not faults.get("driver_version")
            else CUDA_BY_DRIVER_BRANCH.get(driver.split(".")[0], "12.4")
        )
    )
    model = str(gpu_cfg.get("model", "NVIDIA H100 80GB HBM3"))
    physical_count = int(gpu_cfg.get("count", 8))
    missing = faults.get("gpu_missing") or []
    if isinstance(missing, int) and not isinstance(missing, bool):
        missing = [physical_count - 1 - k for k in range(missing)]
    missing = {int(m) for m in missing}
    idle = gpu_cfg.get("idle") or {}
    bus_ids = gpu_cfg.get("pci_bus_ids") or []
    module_ids = gpu_cfg.get("module_ids") or []
    temps = faults.get("gpu_temperature_c")
    cluster_name = profile["name"]
    gpus = []
    for phys in range(physical_count):
        if phys in missing:
            continue
        bus = str(bus_ids[phys]) if phys < len(bus_ids) else f"{0x18 + 0x10 * phys:02X}"
        power_limit = float(gpu_cfg.get("power_limit_w", 700))
        gpus.append(
            {
                "index": len(gpus),
                "physical_index": phys,
                "name": model,
                "brand": str(gpu_cfg.get("brand", "NVIDIA")),
                "architecture": str(gpu_cfg.get("architecture", "Hopper")),
                "compute_cap": str(gpu_cfg.get("compute_cap", "9.0")),
                "uuid": gpu_uuid(cluster_name, node, phys),
                "serial": gpu_serial(cluster_name, node, phys),
                "minor_number": phys,
                "pci_bus": bus.upper(),
                "pci_bus_id": f"00000000:{bus.upper()}:00.0",
                "pci_device_id": str(gpu_cfg.get("pci_device_id", "0x233010DE")),
                "pci_sub_system_id": str(gpu_cfg.get("pci_sub_system_id", "0x16C110DE")),
                "pcie_gen": int(gpu_cfg.get("pcie_gen", 5)),
                "pcie_width": int(gpu_cfg.get("pcie_width", 16)),
                "board_id": f"0x{int(bus, 16) << 8:x}",
                "module_id": int(module_ids[phys]) if phys < len(module_ids) else phys + 1,
                "vbios_version": str(gpu_cfg.get("vbios_version", "96.00.99.00.01")),
                "board_part_number": str(gpu_cfg.get("board_part_number", "692-2G520-0200-000")),
                "gpu_part_number": str(gpu_cfg.get("gpu_part_number", "2330-885-A1")),
                "inforom_image": str(gpu_cfg.get("inforom_image", "G520.0200.00.05")),
                "memory_total_mib": int(gpu_cfg.get("memory_mib", 81559)),
                "memory_reserved_mib": int(gpu_cfg.get("memory_reserved_mib", 551)),
                "memory_used_mib": int(idle.get("memory_used_mib", 1)),
                "bar1_mib": int(gpu_cfg.get("bar1_mib", 131072)),
                "temperature_c": int(_per_gpu(temps, phys, _per_gpu(idle.get("temperature_c"), phys, 27))),
                "memory_temperature_c": int(idle.get("memory_temperature_c", 36)),
                "power_draw_w": float(_per_gpu(idle.get("power_draw_w"), phys, 72.0)),
                "power_limit_w": power_limit,
                "power_limit_min_w": float(gpu_cfg.get("power_limit_min_w", 200)),
                "power_limit_max_w": float(gpu_cfg.get("power_limit_max_w", power_limit)),
                "sm_clock_mhz": int(idle.get("sm_clock_mhz", 1980)),
                "mem_clock_mhz": int(idle.get("mem_clock_mhz", 2619)),
                "max_sm_clock_mhz": int(gpu_cfg.get("clocks_max_sm_mhz", 1980)),
                "max_mem_clock_mhz": int(gpu_cfg.get("clocks_max_mem_mhz", 2619)),
                "max_video_clock_mhz": int(gpu_cfg.get("clocks_max_video_mhz", 1545)),
                "utilization_pct": int(idle.get("utilization_pct", 0)),
                "persistence_mode": bool(gpu_cfg.get("persistence_mode", True)),
                "ecc_uncorrected_volatile": int(_per_gpu(gpu_cfg.get("ecc_uncorrected_volatile"), phys, 0)),
                "performance_state": "P0",
            }
        )
        # NVML's GpuIdle reason (0x1) is what holds an idle GPU's SM clock below its maximum.
        gpus[-1]["clocks_event_reasons"] = 0x1 if gpus[-1]["sm_clock_mhz"] < gpus[-1]["max_sm_clock_mhz"] else 0
    slurm = settings.get("slurm") or {}
    xid = faults.get("xid") or []
    if isinstance(xid, int | str):
        xid = [xid]
    kernel_lines = [_xid_line(entry, gpus, k) for k, entry in enumerate(xid)]
    amd_state = None
    if amd.vendor_of(settings) == "amd":
        try:
            amd_state = amd.render(settings, faults, node, cluster_name, missing)
        except ValueError as exc:
            raise ProfileError(f"{node}: {exc}") from None
        _as_amd(gpus, amd_state)
        kernel_lines += amd_state["ras_kernel_lines"]
    return {
        "node": node,
        "cluster": cluster_name,
        "driver_version": driver,
        "cuda_version": cuda,
        "dcgm_version": str(settings.get("dcgm_version", "4.5.3")),
        "dcgm_exporter_version": str(faults.get("dcgm_exporter_version")
                                     or settings.get("dcgm_exporter_version", "4.8.2")),
        "container_toolkit_version": str(faults.get("container_toolkit_version")
                                         or settings.get("container_toolkit_version", "1.19.1")),
        # an AMD node has no nvidia-smi (nor the other NVIDIA tools: sim/amd.py absent_tools)
        "nvidia_smi": "missing" if amd_state else faults.get("nvidia_smi", "ok"),
        "gpus": gpus,
        "nics": settings.get("nics") or [],
        # the kernel's lines from before the run: Xids, amdgpu RAS reports (written to /sim/kmsg and kern.log)
        "xid": kernel_lines,
        # a node under provider automation keeps a kern.log the power daemon appends kernel messages to
        "telemetry": _telemetry(node, faults, gpus, bool(kernel_lines), "provider" in settings),
        "slurm": {
            "cpus": _host_cpus() if str(slurm.get("cpus", "host")) == "host" else int(slurm["cpus"]),
            "real_memory_mb": (_host_memory_mb() if str(slurm.get("real_memory_mb", "host")) == "host"
                               else int(slurm["real_memory_mb"])),
            "partition": str(slurm.get("partition", "gpu")),
            "gres_type": str(slurm.get("gres_type") or gres_type(model)),
            "gres_count": int(slurm.get("gres_count", physical_count)),
            "state": str(faults.get("slurm_state", "idle")),
            "reason": str(faults.get("slurm_reason", "")),
        },
        "unreachable": bool(faults.get("unreachable", False)),
        "fabric": _fabric(settings, faults, gpus, len(amd_state["gpus"]) if amd_state else None),
        **({"amd": amd_state} if amd_state else {}),
    }


def _as_amd(gpus: list[dict[str, Any]], amd_state: dict[str, Any]) -> None:
    """The physical GPU list (what lspci, Slurm's GRES and the sysfs see) as AMD devices."""
    first = {d["physical_index"]: d for d in amd_state["gpus"] if d["partition_id"] == 0}
    for gpu in gpus:
        device = first[gpu["physical_index"]]
        gpu.update(name=device["market_name"], brand="AMD", vendor="amd", architecture="CDNA",
                   pci_bus=device["bdf"][5:7].upper(), pci_bus_id=device["bdf"].upper().replace("0000:", "00000000:"),
                   pci_device_id=f"{device['device_id']}1002", pci_sub_system_id=f"{device['subsystem_id']}1002",
                   uuid=device["uuid"], serial=device["serial"],
                   memory_total_mib=device["vram_total_mb"], power_limit_w=device["power_cap_w"])


# Healthy fabric defaults (an HGX H100 with 8 x 400 Gb/s NDR rails); ``cluster.fabric`` overrides them.
FABRIC_DEFAULTS = {
    "nccl_version": "2.27.7",          # NCCL library the nccl-tests binaries load
    "nccl_tests_version": "2.17.6",
    "nvlink_busbw_gbps": 480.0,        # single-node all_reduce busbw plateau over NVLink (no NVLS)
    "nvls_busbw_gbps": 0.0,            # with NVLink SHARP (0: none; NCCL_NVLS_ENABLE=0 turns it off)
    "shm_busbw_gbps": 24.0,            # NCCL_P2P_DISABLE=1: intra-node traffic through host memory
    "latency_us": 12.0,                # small-message latency of a single-node collective
    "net_latency_us": 28.0,            # ... of a collective spanning nodes
    "rail_efficiency": 0.96,           # achieved / line rate of an RDMA rail (perftest, NCCL)
    "gpudirect": True,                 # GPUDirect RDMA (perftest --use_cuda, NCCL GDR)
    "ib_lat_us": 1.9,                  # ib_write_lat typical, 2-byte messages between two nodes
    "pcie_h2d_gbps": None,             # nvbandwidth host<->device: default from the GPU's PCIe gen/width
    "nvlink_p2p_gbps": 370.0,          # nvbandwidth device_to_device per pair
    "hbm_copy_gbps": 1550.0,           # nvbandwidth device_local_copy
    "xgmi_p2p_gbps": None,             # TransferBench GPU->GPU over one XGMI link, one direction: default by AMD model
    "xgmi_local_copy_gbps": None,      # TransferBench device-local copy (bytes counted once): default by AMD model
}
# Unidirectional host-to-device copy-engine bandwidth of one x16 link per PCIe generation (GB/s).
PCIE_H2D_X16_GBPS = {3: 12.5, 4: 26.0, 5: 55.5, 6: 110.0}
# TransferBench figures of a healthy AMD node per model (GB/s, one direction, enough CUs), where the profile does not
# set them. XGMI: AMD rates an MI300X/MI325X link 64 GB/s a direction (128 GB/s bidirectional); CRC and protocol
# overhead leave ~48 GB/s usable per link (ROCm blog "Understanding RCCL Bandwidth and xGMI Performance on AMD
# Instinct MI300X", 2025). MI355X: 153.6 GB/s bidirectional per link (AMD MI355X data sheet), the same ~75% usable
# ratio: ~57.6 GB/s (no public TransferBench capture). Local copy: a copy kernel on all CUs, bytes counted once, about
# half of the 4-5 TB/s read+write HBM3/HBM3E reach (modelled: no public v1.0x capture).
AMD_TRANSFER_DEFAULTS = {
    "AMD Instinct MI300X": {"xgmi_p2p_gbps": 48.6, "xgmi_local_copy_gbps": 2050.0},
    "AMD Instinct MI325X": {"xgmi_p2p_gbps": 48.6, "xgmi_local_copy_gbps": 2300.0},
    "AMD Instinct MI355X": {"xgmi_p2p_gbps": 58.0, "xgmi_local_copy_gbps": 3000.0},
}
TOOL_FAULT_MODES = ("ok", "missing")
# TransferBench on an AMD node (faults.transferbench): as installed, absent, printing binary noise, its output cut
# before a test's aggregate line, a run-configuration line corrupted as in the corpus's garbled capture, or hanging
# half-way through the tests until killed.
TRANSFERBENCH_MODES = ("ok", "missing", "garbage", "truncated", "garbled", "hang")


def _fabric(settings: dict[str, Any], faults: dict[str, Any], gpus: list[dict[str, Any]],
            devices: int | None = None) -> dict[str, Any]:
    """The node's fabric and its performance faults, resolved for the shims (node.json ``fabric``); ``devices``: the
    GPU devices the tools number on an AMD node (every partition of a GPU in CPX mode is one), else the GPUs."""
    fabric = {**FABRIC_DEFAULTS, **(settings.get("fabric") or {})}
    known_mapping("fabric", settings.get("fabric") or {}, FABRIC_DEFAULTS, error=ProfileError)
    gpu_cfg = settings.get("gpus") or {}
    if fabric["pcie_h2d_gbps"] is None:
        gen, width = int(gpu_cfg.get("pcie_gen", 5)), int(gpu_cfg.get("pcie_width", 16))
        fabric["pcie_h2d_gbps"] = PCIE_H2D_X16_GBPS.get(gen, 55.5) * width / 16
    factors = faults.get("rail_rate_factor") or {}
    down = faults.get("ib_port_down") or []
    trained = faults.get("ib_port_rate") or {}
    rails = []
    for k, nic in enumerate(settings.get("nics") or []):
        name = str(nic.get("name", f"mlx5_{k}"))

        def pick(value: Any, default: Any, name: str = name, k: int = k) -> Any:
            if isinstance(value, dict):
                for key in (name, k, str(k)):
                    if key in value:
                        return value[key]
                return default
            if isinstance(value, list | tuple):
                return True if (name in value or k in value) else default
            return default

        rate = float(pick(trained, nic.get("rate_gbps", 400)))
        rails.append({"name": name, "rate_gbps": rate, "factor": float(pick(factors, 1.0)),
                      "up": not pick(down, False), "link_layer": nic.get("link_layer", "InfiniBand"),
                      "netdev": nic.get("netdev")})
    if isinstance(factors, dict):
        names = {r["name"] for r in rails} | {str(i) for i in range(len(rails))} | set(range(len(rails)))
        for key in factors:
            if key not in names:
                raise ProfileError(f"faults.rail_rate_factor: {key!r} is not one of the node's rails")
    straggler = faults.get("straggler_gpu")
    if straggler is not None:
        if not isinstance(straggler, dict) or "gpu" not in straggler:
            raise ProfileError("faults.straggler_gpu must be {gpu: INDEX, factor: 0..1}")
        if int(straggler["gpu"]) >= len(gpus):
            raise ProfileError(f"faults.straggler_gpu.gpu {straggler['gpu']} is not one of the node's GPUs")
        straggler = {"gpu": int(straggler["gpu"]), "factor": float(straggler.get("factor", 0.7))}
    nccl: dict[str, Any] = {}
    for key, allowed in (("nccl_hang", {"collective", "size"}),
                         ("nccl_jagged", {"collective", "factor", "from_bytes"}),
                         ("nccl_wrong", {"collective", "from_bytes", "sizes", "count"})):
        value = faults.get(key)
        if value is None:
            continue
        if not isinstance(value, dict) or set(value) - allowed:
            raise ProfileError(f"faults.{key} must be a mapping with keys {sorted(allowed)}")
        nccl[key.removeprefix("nccl_")] = value
    for tool in ("nccl_tests", "perftest", "nvbandwidth"):
        if faults.get(tool, "ok") not in TOOL_FAULT_MODES:
            raise ProfileError(f"faults.{tool} must be one of {list(TOOL_FAULT_MODES)}")
    if faults.get("transferbench", "ok") not in TRANSFERBENCH_MODES:
        raise ProfileError(f"faults.transferbench must be one of {list(TRANSFERBENCH_MODES)}")
    model = AMD_TRANSFER_DEFAULTS.get(str(gpu_cfg.get("model")), AMD_TRANSFER_DEFAULTS["AMD Instinct MI300X"])
    for key, value in model.items():
        if fabric[key] is None:
            fabric[key] = value
    return {**fabric, "rails": rails, "nvlink_factor": float(faults.get("nvlink_factor", 1.0)),
            "straggler_gpu": straggler, "nccl_faults": nccl,
            "slow_host_link": _slow_host_links(faults.get("slow_host_link"), len(gpus) if devices is None else devices),
            "tools": {t: faults.get(t, "ok") for t in ("nccl_tests", "perftest", "nvbandwidth", "transferbench")}}


def _slow_host_links(value: Any, count: int) -> dict[str, float]:
    """``faults.slow_host_link`` (``{gpu: 3, factor: 0.45}`` or a list of them; ``gpu`` is the device index the
    GPU tools number, after ``gpu_missing``) as ``{"3": 0.45}``: that GPU's PCIe host link moves ``factor`` of its
    healthy figure both ways (a link trained down, a bad riser), and so does peer traffic routed over it."""
    out: dict[str, float] = {}
    for entry in _run_fault_entries(value or []):
        if not isinstance(entry, dict) or set(entry) - {"gpu", "factor"} or "gpu" not in entry:
            raise ProfileError("faults.slow_host_link must be {gpu: INDEX, factor: 0..1} or a list of them")
        gpu, factor = entry["gpu"], entry.get("factor", 0.45)
        if not _is_whole(gpu) or gpu >= count:
            raise ProfileError(f"faults.slow_host_link.gpu {gpu!r} is not one of the node's {count} GPUs")
        if not _is_number(factor) or not 0 < factor <= 1:
            raise ProfileError(f"faults.slow_host_link.factor must be a number above 0 and at most 1, not {factor!r}")
        out[str(gpu)] = float(factor)
    return out


KERN_LOG = "/var/log/kern.log"


def _telemetry(node: str, faults: dict[str, Any], gpus: list[dict[str, Any]], past_xid: bool,
               provider: bool = False) -> dict[str, Any]:
    """What an ``nvidia-smi`` loop process on this node plays out (``gpu_hot``, ``gpu_throttle``,
    ``xid_during_run``, ``ecc_growth``, ``clock_loss``), resolved for the shim: GPUs by nvidia-smi index,
    reason bits, the driver's lines.

    ``kern_log`` names the node's own kernel log file (an overlay file inside the node's mount namespace,
    see overlays/monitoring.py) when the node has one, else None.
    """
    out: list[dict[str, Any]] = []

    def gpu_of(fault: str, entry: dict[str, Any]) -> int:
        index = int(entry["gpu"])
        if index >= len(gpus):
            raise ProfileError(f"{node}: faults.{fault}.gpu {index} is not one of the node's "
                               f"{len(gpus)} GPUs (nvidia-smi indices 0-{len(gpus) - 1})")
        return index

    for entry in _run_fault_entries(faults.get("gpu_hot") or []):
        out.append({"kind": "gpu_hot", "gpu": gpu_of("gpu_hot", entry), "after_s": float(entry.get("after_s", 0)),
                    "temperature_c": float(entry["temperature_c"]),
                    "memory_temperature_c": float(entry.get("memory_temperature_c",
                                                            float(entry["temperature_c"]) + 6)),
                    "sm_clock_mhz": entry.get("sm_clock_mhz")})
    for entry in _run_fault_entries(faults.get("gpu_throttle") or []):
        index = gpu_of("gpu_throttle", entry)
        out.append({"kind": "gpu_throttle", "gpu": index, "after_s": float(entry.get("after_s", 0)),
                    "reason": entry["reason"], "mask": THROTTLE_REASONS[entry["reason"]],
                    "sm_clock_mhz": int(entry.get("sm_clock_mhz", gpus[index]["max_sm_clock_mhz"] // 2))})
    for entry in _run_fault_entries(faults.get("ecc_growth") or []):
        out.append({"kind": "ecc_growth", "gpu": gpu_of("ecc_growth", entry),
                    "after_s": float(entry.get("after_s", 0)),
                    "corrected_per_min": float(entry.get("corrected_per_min", 60)),
                    "uncorrected": int(entry.get("uncorrected", 0))})
    for entry in _run_fault_entries(faults.get("clock_loss") or []):
        out.append({"kind": "clock_loss", "gpu": gpu_of("clock_loss", entry),
                    "after_s": float(entry.get("after_s", 0)), "sm_clock_mhz": int(entry["sm_clock_mhz"])})
    xids = _run_fault_entries(faults.get("xid_during_run") or [])
    for entry in xids:
        index = gpu_of("xid_during_run", entry)
        code = int(entry.get("code", 79))
        # the driver prints the bus in lower-case hex (corpus: kernel-xid, "PCI:0000:9b:00")
        lines = [_xid_message({"code": code, "gpu": index, "message": entry.get("message")}, gpus, lower=True)]
        if code == 79:  # the driver's second line for a GPU that fell off the bus (corpus: kernel-xid)
            lines.append(f"NVRM: GPU {gpus[index]['pci_bus_id'][4:].lower()}: GPU has fallen off the bus.")
        out.append({"kind": "xid", "gpu": index, "after_s": float(entry.get("after_s", 0)), "code": code,
                    "lines": lines})
    return {"kern_log": KERN_LOG if (past_xid or xids or provider) else None, "faults": out}


def _xid_line(entry: Any, gpus: list[dict[str, Any]], position: int) -> str:
    """A kernel log line exactly as the NVIDIA driver prints an Xid (``NVRM: Xid (PCI:…): 79, …``)."""
    if isinstance(entry, str) and "NVRM" in entry:
        return entry
    return f"[{1234.5 + 60 * position:12.6f}] {_xid_message(entry, gpus)}"


def _xid_message(entry: Any, gpus: list[dict[str, Any]], lower: bool = False) -> str:
    """The driver's ``NVRM: Xid (PCI:0000:BB:00): <code>, <message>`` text, without the ring-buffer time."""
    if isinstance(entry, dict):
        code, gpu, text = int(entry.get("code", 79)), int(entry.get("gpu", 0)), entry.get("message")
    else:
        code, gpu, text = int(entry), 0, None
    bus = gpus[gpu]["pci_bus"] if gpu < len(gpus) else "18"
    bus = bus.lower() if lower else bus
    message = text or {
        79: "pid=1824, name=python, GPU has fallen off the bus.",
        48: "pid=1824, name=python, An uncorrectable double bit error (DBE) has been detected on GPU.",
        94: "pid=1824, name=python, Contained: SM (0x1). RST: No, D-RST: No",
        95: "pid=1824, name=python, Uncontained: FBHUB. RST: Yes, D-RST: No",
        13: "pid=1824, name=python, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
        31: "pid=1824, name=python, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0",
    }.get(code, "pid=1824, name=python, Graphics Exception")
    return f"NVRM: Xid (PCI:0000:{bus}:00): {code}, {message}"


def node_names(count: int) -> list[str]:
    """The simulated nodes' names: ``node1`` … ``nodeN``."""
    return [f"node{i}" for i in range(1, count + 1)]


# ----------------------------------------------------------------------------------------- provider automation
# What the (simulated) provider runs around the nodes: Slurm's HealthCheckProgram, its own remediation
# (in the power daemon, sim/power.py), the BMC's reboot timings and DCGM's injection support. Set under
# ``cluster: {provider: …}`` and overridable per node (``nodes: {node3: {provider: …}}``), except
# ``health_check.interval_s``: slurm.conf has one HealthCheckInterval for the whole cluster.
HEALTH_CHECK_MODES = ("drain", "none", "times_out", "exit_1")
REMEDIATION_MODES = ("none", "reboot", "resume")
PROVIDER_KEYS = {"health_check", "remediation", "reboot", "dcgm_injection", "k8s"}
K8S_DETECTORS = ("condition", "taint", "cordon", "none")
K8S_REMEDIATIONS = ("none", "reboot")
PROVIDER_SUBKEYS = {
    "k8s": {"detector", "interval_s", "condition", "taint", "remediation", "after_s"},
    "health_check": {"mode", "interval_s", "drain_xids", "after_s", "timeout_s", "from_s", "checks", "node_state"},
    "remediation": {"mode", "after_s", "spare", "return_to_service", "reboot_program", "resume_program",
                    "suspend_program"},
    "reboot": {"shutdown_s", "down_s", "slurmd_s"},
}
XID_CATALOGUE = Path(__file__).resolve().parents[1] / "parsers" / "data" / "xid_catalogue.yml"
# What the provider's health check can look at (sim/slurmconf.py names them in the program; shims/healthcheck.py
# runs them): Xid lines in the kernel ring buffer, `dcgmi health -c`, and nvidia-smi's GPU count against Slurm's.
HEALTH_CHECKS = ("xid", "dcgm_health", "gpu_count", "amd_ras", "amd_gpu_count")
DEFAULT_HEALTH_CHECKS = ["xid", "dcgm_health"]
# HealthCheckNodeState words (slurm.conf(5), 22.05); several join with commas, CYCLE with any of them.
HEALTH_CHECK_NODE_STATES = ("ALLOC", "ANY", "CYCLE", "IDLE", "NONDRAINED_IDLE", "MIXED")
# Keys of the provider's sections that slurm.conf holds once for the whole cluster (besides interval_s and spare,
# refused per node with their own message below).
CLUSTER_ONLY = {"health_check": ("node_state",),
                "remediation": ("return_to_service", "reboot_program", "resume_program", "suspend_program")}


def default_drain_xids() -> list[int]:
    """Xid codes the health check drains on by default: those the catalogue marks critical or major, and 79."""
    data = yamldata.load(XID_CATALOGUE.read_text()) or {}
    codes = {int(x["code"]) for x in data.get("xids") or [] if x.get("severity") in ("critical", "major")}
    return sorted(codes | {79})


def _number_problems(where: str, value: Any, integer: bool = False) -> Iterator[str]:
    if (COUNT if integer else AMOUNT).problem(value):
        yield f"{where} must be a non-negative {'integer' if integer else 'number'}"


def _known_keys_problems(where: str, value: Any, known: Any) -> list[str]:
    """:func:`known_mapping`'s refusal (not a mapping, or keys it does not know) as a problem, if any."""
    try:
        known_mapping(where, value, known, error=ProfileError)
    except ProfileError as exc:
        return [str(exc)]
    return []


def provider_problems(where: str, value: Any, node_level: bool) -> Iterator[str]:
    """What is malformed in a ``provider:`` section, each naming its key."""
    if value is None:
        return
    yield from _known_keys_problems(where, value, PROVIDER_KEYS)
    if not isinstance(value, dict):
        return
    for section, allowed in PROVIDER_SUBKEYS.items():
        sub = value.get(section)
        if sub is None:
            continue
        yield from _known_keys_problems(f"{where}.{section}", sub, allowed)
        for key in ("interval_s", "after_s", "timeout_s", "from_s", "shutdown_s", "down_s", "slurmd_s"):
            if key in _mapping(sub):
                yield from _number_problems(f"{where}.{section}.{key}", sub[key])
    yield from _health_check_problems(where, _mapping(value.get("health_check")), node_level)
    yield from _remediation_problems(where, _mapping(value.get("remediation")), node_level)
    yield from _provider_k8s_problems(where, _mapping(value.get("k8s")))
    if "dcgm_injection" in value and not isinstance(value["dcgm_injection"], bool):
        yield f"{where}.dcgm_injection must be true or false"


def _health_check_problems(where: str, hc: dict[str, Any], node_level: bool) -> Iterator[str]:
    if "mode" in hc and hc["mode"] not in HEALTH_CHECK_MODES:
        yield f"{where}.health_check.mode must be one of {list(HEALTH_CHECK_MODES)}"
    if "interval_s" in hc:
        if node_level:
            yield (f"{where}.health_check.interval_s is cluster-wide only (slurm.conf has one "
                   "HealthCheckInterval); set it under cluster.provider.health_check")
        elif _is_number(hc["interval_s"]) and POSITIVE_COUNT.problem(hc["interval_s"]):  # others: refused above
            yield f"{where}.health_check.interval_s must be a whole number of seconds >= 1"
    yield from _cluster_only_problems(where, "health_check", hc, node_level)
    if "checks" in hc and (not isinstance(hc["checks"], list) or any(c not in HEALTH_CHECKS for c in hc["checks"])):
        yield f"{where}.health_check.checks must be a list of {list(HEALTH_CHECKS)}"
    if "node_state" in hc and not (isinstance(hc["node_state"], str) and hc["node_state"] and all(
            word in HEALTH_CHECK_NODE_STATES for word in hc["node_state"].split(","))):
        yield (f"{where}.health_check.node_state must be one or more of {list(HEALTH_CHECK_NODE_STATES)}, "
               "joined with commas (HealthCheckNodeState)")
    if "drain_xids" in hc:
        codes = hc["drain_xids"]
        if not isinstance(codes, list) or any(COUNT.problem(c) for c in codes):
            yield f"{where}.health_check.drain_xids must be a list of Xid codes (integers)"


def _cluster_only_problems(where: str, section: str, settings: dict[str, Any], node_level: bool) -> Iterator[str]:
    for key in CLUSTER_ONLY[section]:
        if node_level and key in settings:
            yield (f"{where}.{section}.{key} is cluster-wide only (slurm.conf has one); set it "
                   f"under cluster.provider.{section}")


def _remediation_problems(where: str, rem: dict[str, Any], node_level: bool) -> Iterator[str]:
    if "mode" in rem and rem["mode"] not in REMEDIATION_MODES:
        yield f"{where}.remediation.mode must be one of {list(REMEDIATION_MODES)}"
    if "spare" in rem and rem["spare"] is not None:
        if node_level:
            yield f"{where}.remediation.spare is cluster-wide only (the provider's spare pool)"
        elif not (isinstance(rem["spare"], str) and NODE_NAME.fullmatch(rem["spare"])):
            yield f"{where}.remediation.spare must be a node name like node5"
    yield from _cluster_only_problems(where, "remediation", rem, node_level)
    if "return_to_service" in rem and rem["return_to_service"] not in (0, 1, 2):
        yield f"{where}.remediation.return_to_service must be 0, 1 or 2 (ReturnToService)"
    for key in ("reboot_program", "resume_program", "suspend_program"):
        if key in rem and not (isinstance(rem[key], str) and rem[key].startswith("/")):
            yield f"{where}.remediation.{key} must be an absolute path"


def _provider_k8s_problems(where: str, k8s: dict[str, Any]) -> Iterator[str]:
    if "detector" in k8s and k8s["detector"] not in K8S_DETECTORS:
        yield f"{where}.k8s.detector must be one of {list(K8S_DETECTORS)}"
    if "remediation" in k8s and k8s["remediation"] not in K8S_REMEDIATIONS:
        yield f"{where}.k8s.remediation must be one of {list(K8S_REMEDIATIONS)}"
    if "interval_s" in k8s and _is_number(k8s["interval_s"]) and k8s["interval_s"] == 0:  # < 0: refused above
        yield f"{where}.k8s.interval_s must be a positive number of seconds"
    if "condition" in k8s and not (isinstance(k8s["condition"], str)
                                   and re.fullmatch(r"[A-Z][A-Za-z0-9]*", k8s["condition"])):
        yield f"{where}.k8s.condition must be a node condition type in CamelCase, e.g. NvidiaGPUProblem"
    if "taint" in k8s and not (isinstance(k8s["taint"], str) and re.fullmatch(
            r"[A-Za-z0-9][-A-Za-z0-9_./]*(=[-A-Za-z0-9_.]*)?:(NoSchedule|PreferNoSchedule|NoExecute)", k8s["taint"])):
        yield (f"{where}.k8s.taint must be key[=value]:Effect with Effect NoSchedule, PreferNoSchedule "
               "or NoExecute")


# ----------------------------------------------------------------------------------------- Slurm settings
# ``slurm:`` keys (sim/slurmconf.py writes them into slurm.conf): per node (the node's line, its own prolog and
# epilog), and those slurm.conf holds once, cluster-wide only.
SLURM_NODE_KEYS = {"cpus", "real_memory_mb", "partition", "gres_type", "gres_count", "prolog_s", "epilog_s"}
SLURM_CLUSTER_KEYS = {"controller", "message_timeout_s", "prolog_epilog_timeout_s", "batch_start_timeout_s",
                      "job_defaults", "partition_job_defaults"}
SLURM_JOB_DEFAULTS = {"cpus_per_gpu", "mem_per_gpu_mb", "mem_per_cpu_mb"}
# A simulated node's name (node_names): node1, node2, ... with no leading zeros.
NODE_NAME = re.compile(r"node[1-9]\d*")


def slurm_problems(where: str, section: dict[str, Any], node_level: bool) -> Iterator[str]:
    """What is malformed in a ``slurm:`` section, ``racks:`` (cluster) or ``rack:`` (node), naming the key."""
    slurm = section.get("slurm")
    if slurm is not None and not isinstance(slurm, dict):
        yield f"{where}.slurm must be a mapping"
    elif slurm is not None:
        yield from _slurm_section_problems(f"{where}.slurm", slurm, node_level)
    yield from _rack_problems(where, section, node_level)


def _slurm_section_problems(where: str, slurm: dict[str, Any], node_level: bool) -> Iterator[str]:
    allowed = SLURM_NODE_KEYS | (set() if node_level else SLURM_CLUSTER_KEYS)
    unknown = set(slurm) - allowed
    for key in sorted(unknown & SLURM_CLUSTER_KEYS):
        yield f"{where}.{key} is cluster-wide only (slurm.conf has one); set it under cluster.slurm"
    if unknown - SLURM_CLUSTER_KEYS:
        yield f"{where} has unknown keys {sorted(unknown - SLURM_CLUSTER_KEYS, key=str)}; known: {sorted(allowed)}"
    for key in ("prolog_s", "epilog_s", "message_timeout_s", "prolog_epilog_timeout_s", "batch_start_timeout_s"):
        if key in slurm:
            yield from _number_problems(f"{where}.{key}", slurm[key], integer=key.endswith("timeout_s"))
    if "controller" in slurm and slurm["controller"] is not None and not (
            isinstance(slurm["controller"], str) and NODE_NAME.fullmatch(slurm["controller"])):
        yield f"{where}.controller must be a node name like node1 (or null: the host)"
    for key in ("job_defaults", "partition_job_defaults"):
        values = slurm.get(key)
        if values is None:
            continue
        if not isinstance(values, dict) or set(values) - SLURM_JOB_DEFAULTS:
            yield f"{where}.{key} must be a mapping with keys {sorted(SLURM_JOB_DEFAULTS)}"
        for name, value in _mapping(values).items():
            yield from _number_problems(f"{where}.{key}.{name}", value, integer=True)
    yield from schema_problems(where, slurm, SLURM_SCHEMA)


def _rack_problems(where: str, section: dict[str, Any], node_level: bool) -> Iterator[str]:
    if node_level:
        if "racks" in section:
            yield f"{where}.racks is cluster-wide; a node names its own with rack: NAME"
        if "rack" in section and not (isinstance(section["rack"], str) and section["rack"]):
            yield f"{where}.rack must be a rack name"
        return
    if "rack" in section:
        yield f"{where}.rack is per node; the cluster lists racks: {{RACK: [node1, ...]}}"
    racks = section.get("racks")
    if racks is not None and not (isinstance(racks, dict) and all(
            isinstance(members, list) and all(isinstance(n, str) and NODE_NAME.fullmatch(n) for n in members)
            for members in racks.values())):
        yield f"{where}.racks must map each rack name to a list of node names"


def provider_settings(profile: dict[str, Any], node: str) -> dict[str, Any]:
    """The node's provider automation with every default filled in (today's behaviour when unset)."""
    raw = node_settings(profile, node).get("provider") or {}
    cluster_hc = (profile["cluster"].get("provider") or {}).get("health_check") or {}
    cluster_rem = (profile["cluster"].get("provider") or {}).get("remediation") or {}
    hc = raw.get("health_check") or {}
    rem = raw.get("remediation") or {}
    boot = raw.get("reboot") or {}
    k8s = raw.get("k8s") or {}
    return {
        "configured": "provider" in profile["cluster"] or "provider" in profile["nodes"].get(node, {}),
        "health_check": {
            "mode": hc.get("mode", "drain"),
            "cluster_mode": cluster_hc.get("mode", "drain"),
            "interval_s": int(cluster_hc.get("interval_s", 30)),
            "drain_xids": [int(c) for c in hc["drain_xids"]] if "drain_xids" in hc else default_drain_xids(),
            "after_s": float(hc.get("after_s", 0)),
            "timeout_s": float(hc.get("timeout_s", 2)),
            "from_s": float(hc.get("from_s", 0)),
            "checks": list(hc.get("checks", DEFAULT_HEALTH_CHECKS)),
            "node_state": str(cluster_hc.get("node_state", "ANY")),
        },
        "remediation": {
            "mode": rem.get("mode", "none"),
            "after_s": float(rem.get("after_s", 30)),
            "spare": cluster_rem.get("spare"),
            "return_to_service": int(cluster_rem.get("return_to_service", 2)),
            **{key: cluster_rem.get(key) for key in ("reboot_program", "resume_program", "suspend_program")},
        },
        "reboot": {
            "shutdown_s": float(boot.get("shutdown_s", 1)),
            "down_s": float(boot.get("down_s", 3)),
            "slurmd_s": float(boot.get("slurmd_s", 1)),
        },
        "dcgm_injection": bool(raw.get("dcgm_injection", True)),
        # the provider's Kubernetes node health agent (sim/k8s_provider.py); only with k8s enabled
        "k8s": {
            "detector": k8s.get("detector", "none"),
            "interval_s": float(k8s.get("interval_s", 5)),
            "condition": str(k8s.get("condition", "NvidiaGPUProblem")),
            "taint": str(k8s.get("taint", "nvidia.com/gpu-unhealthy=true:NoSchedule")),
            "remediation": k8s.get("remediation", "none"),
            "after_s": float(k8s.get("after_s", 30)),
        },
    }


# ----------------------------------------------------------------------------------------- the profile schema
# Types and ranges of the settings render_node and _fabric read, the same in the cluster defaults and in a
# node's overrides. Sections with checks of their own (provider, Slurm's timeouts, faults during a run, the
# overlay areas) are not repeated here. As before, keys a section does not name are left alone (an overlay
# area may read them), except in ``fabric``, whose keys are FABRIC_DEFAULTS'.


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)  # YAML's true is no number


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Kind:
    """One scalar setting: what a message calls it, which values are of it and, for numbers, its range."""

    noun: str
    fits: Callable[[Any], bool]
    least: float | None = None
    most: float | None = None

    def problem(self, value: Any) -> str | None:
        if not self.fits(value):
            return f"expected {self.noun}, not {value!r}"
        below = self.least is not None and _is_number(value) and value < self.least
        above = self.most is not None and _is_number(value) and value > self.most
        if not (below or above):
            return None
        if self.most is None:
            return f"must be {self.noun} >= {self.least}, not {value!r}"
        return f"must be {self.noun} from {self.least} to {self.most}, not {value!r}"


@dataclass(frozen=True)
class Section:
    """A mapping of settings; ``closed``: keys it does not name are refused."""

    keys: dict[str, Any]
    closed: bool = False


@dataclass(frozen=True)
class ListOf:
    item: Any


@dataclass(frozen=True)
class OneOrMany:
    """One ``item`` or a list of them; ``by_gpu``: or a mapping GPU index -> item (as :func:`_per_gpu` reads)."""

    item: Any
    by_gpu: bool = False


def schema_problems(where: str, value: Any, schema: Any) -> Iterator[str]:
    """What in ``value`` does not fit ``schema`` (a Kind, Section, ListOf or OneOrMany), each naming its path."""
    if isinstance(schema, Kind):
        problem = schema.problem(value)
        if problem:
            yield f"{where}: {problem}"
    elif value is None:
        return  # an empty section or list, which render_node reads as none
    elif isinstance(schema, Section):
        yield from _section_problems(where, value, schema)
    elif isinstance(schema, ListOf) and not isinstance(value, list):
        yield f"{where}: expected a list, not {value!r}"
    elif isinstance(value, list):
        for k, item in enumerate(value):
            yield from schema_problems(f"{where}[{k}]", item, schema.item)
    elif isinstance(value, dict) and schema.by_gpu:
        for index, item in value.items():
            if COUNT.problem(index) and not str(index).isdigit():
                yield f"{where}: expected GPU indices as keys, not {index!r}"
            yield from schema_problems(f"{where}.{index}", item, schema.item)
    else:
        yield from schema_problems(where, value, schema.item)


def _section_problems(where: str, value: Any, schema: Section) -> Iterator[str]:
    if not isinstance(value, dict):
        yield f"{where}: expected a mapping, not {value!r}"
        return
    if schema.closed:
        yield from _known_keys_problems(where, value, schema.keys)
    for key, sub in schema.keys.items():
        if key in value:
            yield from schema_problems(f"{where}.{key}", value[key], sub)


COUNT = Kind("a whole number", _is_whole, 0)
POSITIVE_COUNT = Kind("a whole number", _is_whole, 1)
AMOUNT = Kind("a number", _is_number, 0)
READING = Kind("a number", _is_number)
PERCENT = Kind("a whole number", _is_whole, 0, 100)
TEXT = Kind("a string", lambda value: isinstance(value, str))
OPTIONAL_TEXT = Kind("a string", lambda value: value is None or isinstance(value, str))
# YAML reads an unquoted 12.10 as the number 12.1: a version is a string.
VERSION = Kind("a quoted version string", lambda value: isinstance(value, str))
FLAG = Kind("true or false", lambda value: isinstance(value, bool))
HOST_OR_COUNT = Kind("'host' or a whole number", lambda value: value == "host" or _is_whole(value), 1)
# The bus of a GPU behind its PCIe switch: the root port, the switch's upstream and downstream ports sit on the
# four buses below it and the rail NIC on the one above (shims/lspci.py), so 04..FE.
PCI_BUS = Kind("a PCI bus number in hex from '04' to 'FE' such as '4C'", lambda value: isinstance(value, str | int)
               and not isinstance(value, bool) and re.fullmatch(r"[0-9A-Fa-f]{1,2}", str(value)) is not None
               and 0x04 <= int(str(value), 16) <= 0xFE)
GPU_MISSING = Kind("a number of GPUs or a list of GPU indices", lambda value: not COUNT.problem(value)
                   or (isinstance(value, list) and not any(COUNT.problem(index) for index in value)))


def _is_xid_entry(value: Any) -> bool:
    """An Xid as ``faults.xid`` lists it: a code, the driver's whole line, or ``{code, gpu, message}``."""
    if isinstance(value, dict):
        return (set(value) <= {"code", "gpu", "message"} and isinstance(value.get("message") or "", str)
                and not any(COUNT.problem(value[key]) for key in ("code", "gpu") if key in value))
    return not COUNT.problem(value) or (isinstance(value, str) and ("NVRM" in value or value.isdigit()))


XID_ENTRY = Kind("an Xid code, an 'NVRM: Xid' line or {code, gpu, message}", _is_xid_entry)


def _kind_of_default(default: Any) -> Kind:
    """The kind of a FABRIC_DEFAULTS value (None: a number left to be derived)."""
    if isinstance(default, bool):
        return FLAG
    if isinstance(default, str):
        return VERSION
    if default is None:
        return Kind("a number or null", lambda value: value is None or _is_number(value), 0)
    return AMOUNT


GPUS_SCHEMA = Section({
    "vendor": Kind("nvidia or amd", lambda value: value in amd.VENDORS),
    "compute_partition": Kind("SPX, DPX, QPX or CPX", lambda value: value in amd.COMPUTE_PARTITIONS),
    "memory_partition": Kind("NPS1, NPS2 or NPS4", lambda value: value in amd.MEMORY_PARTITIONS),
    **dict.fromkeys(("model", "brand", "architecture", "pci_device_id", "pci_sub_system_id", "board_part_number",
                     "gpu_part_number", "inforom_image"), TEXT),
    **dict.fromkeys(("compute_cap", "vbios_version"), VERSION),
    **dict.fromkeys(("count", "memory_mib", "memory_reserved_mib", "bar1_mib", "clocks_max_sm_mhz",
                     "clocks_max_mem_mhz", "clocks_max_video_mhz"), COUNT),
    **dict.fromkeys(("power_limit_w", "power_limit_min_w", "power_limit_max_w"), AMOUNT),
    "pcie_gen": Kind("a whole number", _is_whole, 1, max(PCIE_H2D_X16_GBPS)),
    "pcie_width": POSITIVE_COUNT,
    "pci_bus_ids": ListOf(PCI_BUS),
    "module_ids": ListOf(COUNT),
    "persistence_mode": FLAG,
    "ecc_uncorrected_volatile": OneOrMany(COUNT, by_gpu=True),
    "idle": Section({
        "temperature_c": OneOrMany(READING, by_gpu=True),
        "memory_temperature_c": READING,
        "power_draw_w": OneOrMany(AMOUNT, by_gpu=True),
        **dict.fromkeys(("memory_used_mib", "sm_clock_mhz", "mem_clock_mhz"), COUNT),
        "utilization_pct": PERCENT,
    }),
})
NIC_SCHEMA = Section({"name": TEXT, "netdev": TEXT, "rate_gbps": AMOUNT, "link_layer": TEXT})
_VERSIONS = ("driver_version", "cuda_version", "dcgm_version", "dcgm_exporter_version", "container_toolkit_version")
NODE_SCHEMA = Section({
    **dict.fromkeys(_VERSIONS, VERSION),
    "gpus": GPUS_SCHEMA,
    "nics": ListOf(NIC_SCHEMA),
    "fabric": Section({key: _kind_of_default(default) for key, default in FABRIC_DEFAULTS.items()}, closed=True),
})
CLUSTER_SCHEMA = Section({**NODE_SCHEMA.keys, "name": TEXT, "nodes": POSITIVE_COUNT})
# The Slurm node keys render_node reads (the timeouts and job defaults have checks of their own).
SLURM_SCHEMA = Section({"cpus": HOST_OR_COUNT, "real_memory_mb": HOST_OR_COUNT, "partition": TEXT,
                        "gres_type": OPTIONAL_TEXT, "gres_count": COUNT})
FAULTS_SCHEMA = Section({
    **dict.fromkeys(("driver_version", "cuda_version", "container_toolkit_version", "dcgm_exporter_version"),
                    VERSION),
    "gpu_missing": GPU_MISSING,
    "slurm_state": TEXT,
    "slurm_reason": TEXT,
    "unreachable": FLAG,
    "gpu_temperature_c": OneOrMany(READING, by_gpu=True),
    "xid": OneOrMany(XID_ENTRY),
    "nvlink_factor": AMOUNT,
    "exporters_missing": ListOf(TEXT),
    "transferbench": Kind(f"one of {', '.join(TRANSFERBENCH_MODES)}", lambda value: value in TRANSFERBENCH_MODES),
})
