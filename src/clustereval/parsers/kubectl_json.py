"""Parsers for the Kubernetes API as ``kubectl`` prints it (kubectl 1.2x-1.3x, oc 4.x).

``kubectl-json`` reads ``kubectl get <kinds> [-A] -o json`` (a ``List``), one object (``kubectl get
<kind> <name> -o json``), ``kubectl version -o json``, or several such documents printed one after
another (a shell loop over ``kubectl get``). Every object becomes an item with ``kind``,
``api_version``, ``namespace``, ``name``, ``labels``, ``annotations``, ``created``, and the object's own
``spec``, ``status``, ``data`` (ConfigMaps) and other top-level ``fields`` (StorageClass ``provisioner``)
untouched, so checks read the real API fields.
``format`` is ``list``, ``object``, ``version`` or ``stream`` (more than one document).

``kubectl-api-resources`` reads the ``kubectl api-resources`` table (``NAME SHORTNAMES APIVERSION
NAMESPACED KIND``; kubectl before 1.20 printed ``APIGROUP`` instead of ``APIVERSION``). Each resource:
``name``, ``group``, ``version``, ``namespaced``, ``kind``, ``short_names``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


_ENVELOPE = {"kind", "apiVersion", "metadata", "spec", "status", "data"}


def _item(obj: dict[str, Any], kind: str | None = None) -> dict[str, Any]:
    meta = _dict(obj.get("metadata"))
    return {
        "kind": obj.get("kind") or kind, "api_version": obj.get("apiVersion"),
        "namespace": meta.get("namespace"), "name": meta.get("name"),
        "labels": {str(k): str(v) for k, v in _dict(meta.get("labels")).items()},
        "annotations": {str(k): str(v) for k, v in _dict(meta.get("annotations")).items()},
        "created": meta.get("creationTimestamp"),
        "spec": _dict(obj.get("spec")), "status": _dict(obj.get("status")), "data": _dict(obj.get("data")),
        # kinds without a spec keep their settings at the top (StorageClass provisioner, parameters)
        "fields": {k: v for k, v in obj.items() if k not in _ENVELOPE},
    }


def _documents(text: str) -> tuple[list[Any], list[str]]:
    """Every JSON document in ``text`` (kubectl prints one; a shell loop prints several)."""
    decoder = json.JSONDecoder()
    docs, warnings, pos = [], [], 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            break
        skipped = text[pos:start].strip()
        if skipped:
            warnings.append(f"text between JSON documents ignored: {skipped[:160]}")
        try:
            doc, pos = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            if not docs:
                raise ParseError(f"kubectl JSON is malformed or truncated at line {exc.lineno} column "
                                 f"{exc.colno}: {exc.msg}") from None
            warnings.append(f"document {len(docs) + 1} is malformed or truncated: {exc.msg}")
            return docs, [*warnings, "__incomplete__"]
        docs.append(doc)
    tail = text[pos:].strip()
    if tail:
        warnings.append(f"trailing text ignored: {tail[:160]}")
    return docs, warnings


@register("kubectl-json")
def parse(text: str) -> dict[str, Any]:
    """Parse ``kubectl get ... -o json`` / ``kubectl version -o json`` output (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("the kubectl output is empty")
    docs, warnings = _documents(text)
    if not docs:
        raise ParseError("no JSON document in the kubectl output")
    complete = "__incomplete__" not in warnings
    warnings = [w for w in warnings if w != "__incomplete__"]
    items: list[dict[str, Any]] = []
    version: dict[str, Any] = {}
    for doc in docs:
        if not isinstance(doc, dict):
            raise ParseError("a kubectl JSON document is not an object")
        if "clientVersion" in doc or "serverVersion" in doc:
            version = {"client": _dict(doc.get("clientVersion")), "server": _dict(doc.get("serverVersion")),
                       "kustomize": doc.get("kustomizeVersion")}
            continue
        if isinstance(doc.get("items"), list):
            # kubectl fills in kind/apiVersion per item; a raw API list names it only as <Kind>List
            list_kind = str(doc.get("kind") or "")
            kind = list_kind[:-4] if list_kind.endswith("List") and list_kind != "List" else None
            items.extend(_item(obj, kind) for obj in doc["items"] if isinstance(obj, dict))
        elif "metadata" in doc and "kind" in doc:
            items.append(_item(doc))
        else:
            raise ParseError("kubectl JSON is neither a List, an API object nor version information")
    if len(docs) > 1:
        fmt = "stream"
    elif version:
        fmt = "version"
    else:
        fmt = "list" if isinstance(docs[0].get("items"), list) else "object"
    kinds: dict[str, int] = {}
    for item in items:
        kinds[str(item["kind"])] = kinds.get(str(item["kind"]), 0) + 1
    return result("kubectl-json", fmt, complete=complete, warnings=warnings, items=items, kinds=kinds,
                  version=version or None, documents=len(docs))


_HEADER = re.compile(r"^NAME\s+(SHORTNAMES\s+)?(APIVERSION|APIGROUP)\s+NAMESPACED\s+KIND\b")


@register("kubectl-api-resources")
def parse_api_resources(text: str) -> dict[str, Any]:
    """Parse the ``kubectl api-resources`` table (kubectl aligns cells under their header's column)."""
    lines = [ln.rstrip() for ln in (text or "").split("\n")]
    header_at = next((i for i, ln in enumerate(lines) if _HEADER.match(ln)), None)
    if header_at is None:
        raise ParseError("not `kubectl api-resources` output: no 'NAME ... NAMESPACED KIND' header")
    header = lines[header_at]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    resources, warnings = [], []
    for line in lines[header_at + 1:]:
        if not line.strip():
            continue
        if line.startswith(("error:", "E0", "W0", "Warning:")):
            warnings.append(line[:200])
            continue
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line) + 1], strict=True)]
        row = dict(zip(names, cells, strict=True))
        if not row.get("NAME") or row.get("NAMESPACED") not in ("true", "false") or not row.get("KIND"):
            warnings.append(f"line not understood: {line.strip()[:160]}")
            continue
        group_version = row.get("APIVERSION") or row.get("APIGROUP") or ""
        group, _, version = group_version.rpartition("/") if "/" in group_version else ("", "", group_version)
        if "APIGROUP" in row:
            group, version = group_version, None
        resources.append({"name": row["NAME"], "group": group, "version": version,
                          "namespaced": row["NAMESPACED"] == "true", "kind": row["KIND"],
                          "short_names": [s for s in row.get("SHORTNAMES", "").split(",") if s]})
    return result("kubectl-api-resources", "table", complete=True, warnings=warnings, resources=resources)
