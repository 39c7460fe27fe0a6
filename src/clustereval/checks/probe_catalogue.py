"""The node probe catalogue: every ``checks/probes/*.yml`` file, each a ``probes:`` list (data)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from clustereval import yamldata

REQUIRED = ("name", "phase", "cmd")


@cache
def load() -> dict[str, dict[str, Any]]:
    """Every probe by name; a duplicate name or a probe lacking name/phase/cmd is an error."""
    folder = resources.files("clustereval.checks").joinpath("probes")
    probes: dict[str, dict[str, Any]] = {}
    for item in sorted(folder.iterdir(), key=lambda f: f.name):
        if not item.name.endswith(".yml"):
            continue
        for probe in yamldata.load(item.read_text(encoding="utf-8")).get("probes") or []:
            missing = [key for key in REQUIRED if not probe.get(key)]
            if missing:
                raise ValueError(f"probes/{item.name}: probe {probe.get('name')!r} lacks {', '.join(missing)}")
            if probe["name"] in probes:
                raise ValueError(f"probes/{item.name}: probe {probe['name']!r} is defined twice")
            probes[probe["name"]] = {**probe, "source": f"probes/{item.name}"}
    return probes


def for_phase(phase: str, timeout: float | None = None) -> list[dict[str, Any]]:
    """The probes of a phase, ready for ``clustereval.gpu.collect`` (default timeout filled in)."""
    out = []
    for probe in load().values():
        if probe["phase"] != phase:
            continue
        item = {k: v for k, v in probe.items() if k not in ("phase", "source", "description")}
        if timeout is not None and "timeout" not in item:
            item["timeout"] = timeout
        out.append(item)
    return out
