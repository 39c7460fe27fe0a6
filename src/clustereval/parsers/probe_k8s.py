"""Parsers for the Kubernetes audit probes that are not one ``kubectl get -o json`` (``checks/probes/k8s.yml``).

* ``probe-k8s-can-i`` (``k8s_can_i``): one ``<verb resource>: <answer>`` line per question of a
  ``kubectl auth can-i`` loop. kubectl prints ``yes``, or ``no`` optionally followed by `` - <reason>``;
  its warnings and errors arrive on the same stream and are kept as ``messages``. Gives ``answers``:
  ``{question: {"allowed": True|False|None, "reason", "messages"}}``.
* ``probe-k8s-helm`` (``k8s_helm``): ``helm version --short`` (Helm 3/4: ``v3.16.3+gcfd0749``) then
  ``helm list -o json``. Gives ``version`` and ``releases``.
* ``probe-k8s-cpu-manager-state`` (``k8s_cpu_manager_state``): the kubelet's
  ``/var/lib/kubelet/cpu_manager_state`` (JSON with ``policyName``), or ``absent: <path>``. Gives
  ``absent`` (what the probe said is missing, else None) and ``state``.
* ``probe-k8s-pvc-test`` (``k8s_pvc_test``): the storage provisioning test's ``key=value`` lines (see
  :mod:`clustereval.parsers.probe_key_values`), two of them one-line JSON: ``pvc_json`` (``kubectl get pvc
  -o json``) and ``events_json`` (the claim's events, a ``List`` or one ``Event``). Gives ``values``, ``pvc``
  (None when absent or not an object) and ``events`` (``{type, reason, count, message}`` in kubectl's order).
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError
from clustereval.parsers.probe_key_values import first, key_values


def can_i_answers(text: str) -> dict[str, dict[str, Any]]:
    answers: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        question, sep, said = line.partition(": ")
        if not sep:
            continue
        entry = answers.setdefault(question.strip(), {"allowed": None, "reason": None, "messages": []})
        said = said.strip()
        if said == "yes":
            entry["allowed"] = True
        elif said == "no" or said.startswith("no - "):
            entry["allowed"] = False
            entry["reason"] = said[5:] or None
        elif said:
            entry["messages"].append(said[:300])
    return answers


@register("probe-k8s-can-i")
def parse_can_i(text: str) -> dict[str, Any]:
    return result("probe-k8s-can-i", "lines", complete=True, answers=can_i_answers(text))


@register("probe-k8s-helm")
def parse_helm(text: str) -> dict[str, Any]:
    lines = text.strip().splitlines()
    version = lines[0].strip() if lines else ""
    try:
        releases = json.loads("\n".join(lines[1:]) or "null")
    except json.JSONDecodeError:
        raise ParseError(f"`helm list -o json` printed no JSON: {' '.join(lines[1:])[:200]!r}") from None
    if not re.match(r"v\d+\.\d+", version) or not isinstance(releases, list):
        raise ParseError(f"unexpected helm output: {' '.join(lines)[:200]!r}")
    return result("probe-k8s-helm", "version+json", complete=True, version=version, releases=releases)


@register("probe-k8s-cpu-manager-state")
def parse_cpu_manager_state(text: str) -> dict[str, Any]:
    text = text.strip()
    if text.startswith("absent:"):
        return result("probe-k8s-cpu-manager-state", "absent", complete=True, absent=text[8:], state=None)
    try:
        state = json.loads(text)
    except json.JSONDecodeError:
        raise ParseError(f"cpu_manager_state is not JSON: {text[:120]!r}") from None
    if not isinstance(state, dict) or "policyName" not in state:
        raise ParseError(f"cpu_manager_state has no policyName: {text[:120]!r}")
    return result("probe-k8s-cpu-manager-state", "json", complete=True, absent=None, state=state)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def pvc_test(text: str) -> dict[str, Any]:
    """The provisioning test's lines, claim and events (the parser's fields without its envelope)."""
    values = key_values(text, "=")
    doc = _json_object(first(values, "events_json")) or {}
    items = doc.get("items") if doc.get("kind") == "List" else [doc] if doc.get("kind") == "Event" else []
    events = [{"type": e.get("type"), "reason": e.get("reason"), "count": e.get("count"), "message": e.get("message")}
              for e in items or [] if isinstance(e, dict)]
    return {"values": values, "pvc": _json_object(first(values, "pvc_json")), "events": events}


@register("probe-k8s-pvc-test")
def parse_pvc_test(text: str) -> dict[str, Any]:
    return result("probe-k8s-pvc-test", "key=value", complete="end" in key_values(text, "="), **pvc_test(text))
