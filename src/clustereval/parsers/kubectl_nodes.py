"""Parser for Kubernetes / OpenShift node listings (kubectl 1.2x-1.3x, oc 4.x).

Sub-formats (``format``):

* ``json_list`` / ``json_node`` - ``kubectl get nodes -o json`` (a ``List``) or one ``Node`` object;
* ``labels`` - ``... -o json | jq .metadata.labels`` (a flat label map), ``labels_fragment`` when the map
  was filtered through ``grep`` (``"key": "value",`` lines without braces);
* ``capacity`` - ``... | jq .status.capacity`` (or ``.allocatable``);
* ``text`` - ``kubectl get nodes`` / ``-o wide`` table.

Each node: ``name``, ``status`` (``Ready``/``NotReady``/``Unknown``), ``ready``, ``ready_reason``, ``schedulable``,
``problems`` (the other conditions whose status is True: a pressure, a node-problem-detector finding), ``boot_id``
(``nodeInfo.bootID``),
``roles``, ``version``, ``capacity_gpus`` / ``allocatable_gpus`` (``nvidia.com/gpu`` or
``amd.com/gpu``), ``capacity``/``allocatable`` (raw quantities), and the NVIDIA GPU Feature Discovery
facts when labels are present (``gpu_product``, ``gpu_count``, ``gpu_memory_mib``, ``gpu_replicas``,
``mig_strategy``, ``mig_config``, ``mig_config_state``, ``mig_devices`` {profile: count},
``driver_version``, ``cuda_runtime_version``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_int
from clustereval.parsers.errors import ParseError

_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
_CAPACITY_KEYS = {"cpu", "memory", "pods", "ephemeral-storage"}


def _gpu_count(resources: Any) -> int | None:
    if not isinstance(resources, dict):
        return None
    total, seen = 0, False
    for key in _GPU_RESOURCES:
        if key in resources:
            count = to_int(str(resources[key]))
            if count is not None:
                total += count
                seen = True
    return total if seen else None


def _memory_mib(value: int | None) -> int | None:
    """GPU Feature Discovery labels memory in MiB; early releases (e.g. with driver 510) used bytes."""
    if value is None:
        return None
    return value // 2**20 if value >= 2**24 else value


def _label_facts(labels: dict[str, Any]) -> dict[str, Any]:
    def get(key: str) -> str | None:
        value = labels.get(f"nvidia.com/{key}")
        return str(value) if value is not None else None

    mig = {}
    for key, value in labels.items():
        match = re.fullmatch(r"nvidia\.com/mig-(.+)\.count", str(key))
        if match:
            mig[match.group(1)] = to_int(str(value))
    driver = [get(f"cuda.driver.{p}") for p in ("major", "minor", "rev")]
    runtime = [get(f"cuda.runtime.{p}") for p in ("major", "minor")]
    return {
        "gpu_product": get("gpu.product"), "gpu_count": to_int(get("gpu.count")),
        "gpu_memory_mib": _memory_mib(to_int(get("gpu.memory"))), "gpu_replicas": to_int(get("gpu.replicas")),
        "gpu_family": get("gpu.family"), "mig_strategy": get("mig.strategy"), "mig_config": get("mig.config"),
        "mig_config_state": get("mig.config.state"), "mig_devices": mig,
        "driver_version": ".".join(d for d in driver if d) if all(driver) else None,
        "cuda_runtime_version": ".".join(r for r in runtime if r) if all(runtime) else None,
    }


def _node_from_object(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    ready, problems, ready_reason = None, [], None
    conditions = status.get("conditions")
    for cond in conditions if isinstance(conditions, list) else []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            ready = {"True": "Ready", "False": "NotReady"}.get(str(cond.get("status")), "Unknown")
            ready_reason = cond.get("reason")
        elif isinstance(cond, dict) and str(cond.get("status")) == "True":
            # Every other condition (the kubelet's pressures, node-problem-detector's) is True on a problem.
            problems.append({k: cond.get(k) for k in ("type", "reason", "message")})
    roles = sorted(k.split("/", 1)[1] for k in labels if str(k).startswith("node-role.kubernetes.io/"))
    info = status.get("nodeInfo") if isinstance(status.get("nodeInfo"), dict) else {}
    taints = spec.get("taints")
    node = {
        "name": meta.get("name"), "status": ready, "ready": ready == "Ready",
        "schedulable": spec.get("unschedulable") is not True, "roles": roles,
        "version": info.get("kubeletVersion"),
        "capacity": status.get("capacity") if isinstance(status.get("capacity"), dict) else {},
        "allocatable": status.get("allocatable") if isinstance(status.get("allocatable"), dict) else {},
        "capacity_gpus": _gpu_count(status.get("capacity")),
        "allocatable_gpus": _gpu_count(status.get("allocatable")),
        "taints": [t for t in taints if isinstance(t, dict)] if isinstance(taints, list) else [],
        "labels": labels, "boot_id": info.get("bootID"), "problems": problems, "ready_reason": ready_reason,
    }
    node.update(_label_facts(labels))
    return node


def _empty_node(name: str | None = None) -> dict[str, Any]:
    return {"name": name, "status": None, "ready": None, "schedulable": None, "roles": [], "version": None,
            "capacity": {}, "allocatable": {}, "capacity_gpus": None, "allocatable_gpus": None}


def _from_labels(labels: dict[str, Any]) -> dict[str, Any]:
    node = _empty_node(labels.get("kubernetes.io/hostname"))
    node["roles"] = sorted(k.split("/", 1)[1] for k in labels
                           if str(k).startswith("node-role.kubernetes.io/"))
    node["labels"] = labels
    node.update(_label_facts(labels))
    return node


def _parse_json(doc: Any, warnings: list[str], fmt_hint: str | None = None) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ParseError("kubectl JSON is not an object (expected a Node, a List of nodes, labels or "
                         "capacity)")
    if isinstance(doc.get("items"), list):
        nodes = [_node_from_object(i) for i in doc["items"] if isinstance(i, dict)]
        return result("kubectl-nodes", "json_list", complete=True, warnings=warnings, nodes=nodes)
    if doc.get("kind") == "Node" or ("metadata" in doc and "status" in doc):
        return result("kubectl-nodes", "json_node", complete=True, warnings=warnings,
                      nodes=[_node_from_object(doc)])
    if doc and all(isinstance(v, (str, int)) for v in doc.values()):
        keys = set(doc)
        if keys & _CAPACITY_KEYS or keys & set(_GPU_RESOURCES):
            node = _empty_node()
            node["capacity"] = doc
            node["capacity_gpus"] = _gpu_count(doc)
            return result("kubectl-nodes", "capacity", complete=True, warnings=warnings, nodes=[node])
        return result("kubectl-nodes", fmt_hint or "labels", complete=fmt_hint is None, warnings=warnings,
                      nodes=[_from_labels(doc)])
    raise ParseError("kubectl JSON has no 'items', Node fields, labels or capacity map")


def _parse_text(text: str) -> dict[str, Any]:
    lines = [ln for ln in text.split("\n") if ln.strip()]
    header_index = next((i for i, ln in enumerate(lines) if re.match(r"^NAME\s+STATUS\s+ROLES", ln)), None)
    if header_index is None:
        raise ParseError("not kubectl node output: no JSON and no 'NAME STATUS ROLES ...' header")
    header = lines[header_index]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    nodes, warnings = [], []
    for line in lines[header_index + 1:]:
        # kubectl aligns columns with a tabwriter, so every cell starts at its header's column
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line) + 1], strict=True)]
        row = dict(zip(names, cells, strict=True))
        if not row.get("NAME") or not row.get("STATUS"):
            warnings.append(f"line not understood: {line.strip()[:160]}")
            continue
        node = _empty_node(row["NAME"])
        flags = row["STATUS"].split(",")
        node.update(status=flags[0], ready=flags[0] == "Ready", schedulable="SchedulingDisabled" not in flags,
                    roles=[] if row.get("ROLES") in (None, "<none>") else row["ROLES"].split(","),
                    version=row.get("VERSION") or None, age=row.get("AGE"),
                    internal_ip=row.get("INTERNAL-IP"), os_image=row.get("OS-IMAGE"),
                    kernel_version=row.get("KERNEL-VERSION"), container_runtime=row.get("CONTAINER-RUNTIME"))
        nodes.append(node)
    return result("kubectl-nodes", "text", complete=True, warnings=warnings, nodes=nodes)


@register("kubectl-nodes")
def parse(text: str) -> dict[str, Any]:
    """Parse kubectl/oc node output (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("the kubectl output is empty")
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            doc = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ParseError(f"kubectl JSON is malformed or truncated at line {exc.lineno} column "
                             f"{exc.colno}: {exc.msg}") from None
        return _parse_json(doc, [])
    if re.match(r'^\s*"[^"]+"\s*:', stripped):
        # a label map filtered through grep: "key": "value", lines without the enclosing braces
        body = ",".join(ln.strip().rstrip(",") for ln in stripped.split("\n") if ln.strip())
        try:
            doc = json.loads("{" + body + "}")
        except json.JSONDecodeError as exc:
            raise ParseError(f"kubectl label fragment is not valid JSON lines: {exc.msg}") from None
        warnings = ["JSON fragment without braces (filtered through grep): only the lines shown were read"]
        return _parse_json(doc, warnings, fmt_hint="labels_fragment")
    return _parse_text(text)
