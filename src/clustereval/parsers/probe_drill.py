"""Parsers for a fault drill's output (``clustereval.drills``).

* ``probe-drill-step`` — what one drill step printed on a node: ``## kind key=value`` sections
  (``drills/commands.py``): ``clock`` and ``fault`` (``t``: the node's clock), ``boot_id`` (``id``),
  ``alerts`` (``rc``, then Alertmanager's ``/api/v2/alerts`` JSON: ``firing`` alerts with their labels),
  ``scontrol`` (``rc``, then ``scontrol -o show node`` lines, parsed with the Slurm parser), ``kubectl`` (``rc``,
  then ``kubectl get nodes -o json``, parsed with the kubectl-nodes parser), ``gpus``
  (``rc``, then ``nvidia-smi -L``; with ``tool=amd-smi``, ``amd-smi list``, whose physical GPUs — PARTITION_ID
  0 — are counted), ``gpu_bus`` (``index, pci.bus_id`` rows; with ``vendor=amd``, ``amd-smi list``: the
  physical GPUs in order, by BDF; ``gpu_vendor`` says which), ``job`` (``rc`` and the job's output: GPUs
  listed by ``nvidia-smi -L`` or ``amd-smi list``), ``ready`` / ``unavailable`` (``why``), ``dcgmi`` /
  ``kmsg`` / ``ras`` / ``restored`` (``rc``).
* ``fault-drill-log`` — the drill's log, ``raw/<host>/fault-<drill>.jsonl``: one JSON object per line
  (``kind``: start, poll, step, job, end; ``sent`` / ``received``: the controller's clock), each step's
  ``stdout`` parsed as above under ``observed``. A torn last line (the controller died mid-write) is
  dropped with a warning and makes the log incomplete; so does a log without its ``end`` line.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import clean, result
from clustereval.parsers.amd_smi import parse as parse_amd_smi
from clustereval.parsers.errors import ParseError
from clustereval.parsers.kubectl_nodes import parse as parse_kubectl_nodes
from clustereval.parsers.probe_sections import sections
from clustereval.parsers.slurm import parse as parse_slurm
from clustereval.parsers.slurm import parse_sinfo_columns

_GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]+)\)")
_BUS_ROW = re.compile(r"^\s*(\d+)\s*,\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_USABLE = ("idle", "mixed", "allocated", "completing")


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> int | None:
    return int(value) if re.fullmatch(r"-?\d+", str(value or "")) else None


def amd_smi_physical(body: list[str]) -> list[dict[str, Any]]:
    """The physical GPUs ``amd-smi list`` prints (``GPU: N`` blocks with ``BDF``, ``UUID``, ``PARTITION_ID``): a
    GPU split into compute partitions is listed once per partition, its first (PARTITION_ID 0) standing for
    the GPU; a block without PARTITION_ID (older amd-smi) is a whole GPU. Each: ``gpu`` (amd-smi's index),
    ``bdf``, ``uuid``. Read with the amd-smi parser; output it does not understand lists no GPU."""
    try:
        blocks = parse_amd_smi("\n".join(body)).get("gpus") or []
    except ParseError:
        return []
    return [{"gpu": b.get("gpu"), "bdf": str(b.get("bdf") or "").lower() or None, "uuid": b.get("uuid")}
            for b in blocks if str(b.get("partition_id", 0)).strip() in ("0", "")]


def _scheduler_nodes(body: list[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    text = "\n".join(body)
    if not text.strip():
        return {}, []
    try:
        parsed = parse_slurm(text)
    except ParseError as exc:
        return {}, [f"scontrol output not understood: {exc}"]
    nodes = {}
    for node in parsed.get("nodes", []):
        fields = node.get("fields") or {}
        nodes[node["name"]] = {**_slurm_state(node), "state_raw": node.get("state_raw"),
                               "reason_time": node.get("reason_time"), "slurmd_start": fields.get("SlurmdStartTime"),
                               "boot_time": node.get("boot_time"), "registration": fields.get("SlurmdStartTime")}
    return nodes, list(parsed.get("warnings") or [])


def _slurm_state(node: dict[str, Any]) -> dict[str, Any]:
    """A node of the Slurm parser as the drill sees it: in service when idle/mixed/allocated/completing
    without a drain, down or not-responding flag."""
    usable = node.get("state") in _USABLE and not (node.get("drain") or node.get("down") or node.get("not_responding"))
    return {"state": node.get("state"), "drain": bool(node.get("drain")), "down": bool(node.get("down")),
            "not_responding": bool(node.get("not_responding")), "usable": usable, "reason": node.get("reason"),
            "taints": [], "registration": None}


_BLOCKING = ("NoSchedule", "NoExecute")


def _k8s_nodes(body: list[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """``kubectl get nodes -o json`` as the scheduler's view: a node is usable when Ready, schedulable, free of
    problem conditions and with GPUs allocatable; its blocking taints are listed (the timeline ignores those
    it had before the drill: a GPU pool's own dedication taint is no finding)."""
    try:
        parsed = parse_kubectl_nodes("\n".join(body))
    except ParseError as exc:
        return {}, [f"kubectl output not understood: {exc}"]
    nodes = {}
    for node in parsed.get("nodes", []):
        taints = sorted(f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}" for t in node.get("taints") or []
                        if t.get("effect") in _BLOCKING)
        gpus = node.get("allocatable_gpus")
        usable = bool(node.get("ready")) and bool(node.get("schedulable")) and not node.get("problems") and \
            (gpus is None or gpus > 0)
        reasons = [f"{p.get('type')}: {p.get('reason') or ''} {p.get('message') or ''}".strip()
                   for p in node.get("problems") or []]
        if not node.get("ready"):
            reasons.insert(0, f"{node.get('status') or 'not Ready'} ({node.get('ready_reason') or 'no reason'})")
        if not node.get("schedulable"):
            reasons.append("cordoned")
        nodes[str(node.get("name"))] = {
            "state": "ready" if usable else ("not_ready" if not node.get("ready") else
                                             "cordoned" if not node.get("schedulable") else "degraded"),
            "drain": not node.get("schedulable"), "down": not node.get("ready"), "not_responding": False,
            "usable": usable, "reason": "; ".join(reasons) or None, "taints": taints, "gpus": gpus,
            "registration": node.get("boot_id"), "slurmd_start": None}
    return nodes, list(parsed.get("warnings") or [])


def _alerts(rc: int | None, body: list[str], warnings: list[str]) -> dict[str, Any]:
    """Alertmanager's ``/api/v2/alerts`` list as ``{"rc", "firing": [{"name", "labels", "starts_at"}]}``."""
    if rc != 0:
        return {"rc": rc, "firing": [], "error": "\n".join(body)[-300:]}
    try:
        doc = json.loads("\n".join(body))
    except ValueError as exc:
        warnings.append(f"the alert list is not JSON: {exc}")
        return {"rc": rc, "firing": [], "error": "not JSON"}
    firing = [{"name": (a.get("labels") or {}).get("alertname"), "labels": a.get("labels") or {},
               "starts_at": a.get("startsAt")}
              for a in doc if isinstance(a, dict) and ((a.get("status") or {}).get("state", "active") == "active")]
    return {"rc": rc, "firing": firing}


def _sinfo_nodes(body: list[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """``sinfo -h -N -o '%N|%T|%E'``: every node's state and reason (a node in two partitions is listed twice)."""
    try:
        parsed = parse_sinfo_columns("\n".join(body), ["NODELIST", "STATE", "REASON"], pipe=True)
    except ParseError as exc:
        return {}, [f"sinfo output not understood: {exc}"]
    return {node["name"]: _slurm_state(node) for node in parsed.get("nodes", [])}, list(parsed.get("warnings") or [])


@register("probe-drill-step")
def parse_step(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {"clock": None, "fault_at": None, "boot_id": None, "scheduler": None, "gpus": None,
                           "gpu_bus": {}, "gpu_vendor": None, "job": None, "restored_at": None, "ready": None,
                           "unavailable": None, "alerts": None, "rcs": {}}
    warnings: list[str] = []
    for sec in sections(clean(text)):
        kind, body = sec["kind"], sec["body"]
        if kind == "clock":
            out["clock"] = _float(sec.get("t"))
        elif kind == "fault":
            out["fault_at"] = _float(sec.get("t"))
        elif kind == "boot_id":
            out["boot_id"] = (sec.get("id") or "").strip() or None
        elif kind == "scontrol":
            nodes, more = _scheduler_nodes(body) if _int(sec.get("rc")) == 0 else ({}, [])
            out["scheduler"] = {"kind": "slurm", "rc": _int(sec.get("rc")), "missing": sec.get("missing") == "yes",
                                "nodes": nodes, "output": "\n".join(body)[-2000:]}
            warnings += more
        elif kind in ("kubectl", "kubectl_node", "sinfo"):
            # Every node's state (kubectl's list, sinfo) beside the drilled node's own full record.
            ok = _int(sec.get("rc")) == 0
            nodes, more = (_k8s_nodes(body) if kind != "sinfo" else _sinfo_nodes(body)) if ok else ({}, [])
            current = out["scheduler"] or {"kind": "slurm" if kind == "sinfo" else "k8s", "rc": _int(sec.get("rc")),
                                           "missing": False, "nodes": {}, "output": ""}
            mine = kind == "kubectl_node"
            current["nodes"] = {**nodes, **current["nodes"]} if not mine else {**current["nodes"], **nodes}
            if mine:  # the drilled node's own record says whether the scheduler answered about it
                current["rc"] = _int(sec.get("rc"))
                current["output"] = "\n".join(body)[-2000:]
            out["scheduler"] = current
            warnings += more
        elif kind == "alerts":
            out["alerts"] = _alerts(_int(sec.get("rc")), body, warnings)
        elif kind == "gpus":
            if sec.get("tool") == "amd-smi":
                physical = amd_smi_physical(body)
                out["gpus"] = {"rc": _int(sec.get("rc")), "missing": False, "count": len(physical),
                               "uuids": [g["uuid"] for g in physical], "bdfs": [g["bdf"] for g in physical],
                               "tool": "amd-smi", "output": "\n".join(body)[-2000:]}
                continue
            lines = [m.groups() for m in map(_GPU_LINE.match, body) if m]
            out["gpus"] = {"rc": _int(sec.get("rc")), "missing": sec.get("missing") == "yes", "count": len(lines),
                           "uuids": [uuid for _, _, uuid in lines], "output": "\n".join(body)[-2000:]}
        elif kind == "gpu_bus":
            out["gpu_vendor"] = sec.get("vendor") or "nvidia"
            if out["gpu_vendor"] == "amd":
                out["gpu_bus"] = {i: g["bdf"] for i, g in enumerate(amd_smi_physical(body)) if g["bdf"]}
            else:
                out["gpu_bus"] = {int(m.group(1)): m.group(2) for m in map(_BUS_ROW.match, body) if m}
        elif kind == "job":
            nvidia = sum(1 for line in body if _GPU_LINE.match(line))
            out["job"] = {"rc": _int(sec.get("rc")), "output": "\n".join(body)[-2000:],
                          "gpus": nvidia or len(amd_smi_physical(body))}
        elif kind == "ready":
            out["ready"] = {k: v for k, v in sec.items() if k not in ("kind", "body")}
        elif kind == "unavailable":
            out["unavailable"] = sec.get("why") or "unavailable"
        elif kind in ("dcgmi", "kmsg", "ras", "restored", "end"):
            if kind == "restored":
                out["restored_at"] = _float(sec.get("t"))
            out["rcs"][kind] = _int(sec.get("rc"))
            if body:
                out.setdefault("said", {})[kind] = "\n".join(body)[-2000:]
    return result("probe-drill-step", "sections", complete=True, warnings=warnings, **out)


@register("fault-drill-log")
def parse_log(text: str) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    warnings: list[str] = []
    lines = str(text or "").split("\n")
    torn = bool(lines and lines[-1].strip())  # every line the drill writes ends with a newline
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            if number == len(lines) and torn:
                warnings.append("the last line is cut short (the drill was stopped while writing it)")
            else:
                warnings.append(f"line {number} is not JSON: {line[:120]}")
            continue
        if not isinstance(entry, dict) or not entry.get("kind"):
            warnings.append(f"line {number} is not a drill log entry")
            continue
        if isinstance(entry.get("stdout"), str):
            entry["observed"] = parse_step(entry["stdout"])
        entries.append(entry)
    if not entries:
        raise ParseError("the drill log holds no entry")
    if entries[0].get("kind") != "start":
        raise ParseError("the drill log does not begin with its start entry")
    ended = entries[-1].get("kind") == "end"
    if not ended:
        warnings.append("the drill log has no end entry (the drill did not finish)")
    return result("fault-drill-log", "jsonl", complete=ended and not torn, warnings=warnings,
                  start=entries[0], end=entries[-1] if ended else None, entries=entries)
