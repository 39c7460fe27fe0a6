"""The node probe catalogue: every ``checks/probes/*.yml`` file, each a ``probes:`` list (data).

A probe has ``name``, ``phase``, ``cmd`` (run with ``/bin/sh -c``) and optionally ``tool`` (the program whose
absence means "not installed"), ``parser``, ``artifact``, ``timeout`` (seconds), ``runs`` (``parallel``,
the default; ``exclusive``: alone on the node; ``cluster``: once per cluster), ``on_timeout`` (``error``,
the default: the harness could not get evidence; ``fail``: a timeout is the cluster's fault, a hang) and
``params`` (the parameters it reads, each as ``$CLUSTEREVAL_<NAME>`` in its environment: the one way a
probe is given parameters) and ``cleanup`` (a command, with the same parameters, that removes what the probe
leaves on the node: the probe runner runs it once the collection has ended, also one cut short).

``cmd`` and ``cleanup`` may be lists of pieces, joined with newlines into one script: a piece several probes
of one file share is written once, as a YAML anchor (``- &tier_discovery |`` ... ``- *tier_discovery``).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

from clustereval import yamldata

REQUIRED = ("name", "phase", "cmd")
RUN_MODES = ("parallel", "exclusive", "cluster")
# A parameter becomes $CLUSTEREVAL_<NAME>: it must be a name sh can read.
PARAM_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
TIMEOUT_MEANINGS = ("error", "fail")


@cache
def load() -> dict[str, dict[str, Any]]:
    """Every probe by name; a duplicate name or a probe lacking name/phase/cmd is an error."""
    folder = resources.files("clustereval.checks").joinpath("probes")
    probes: dict[str, dict[str, Any]] = {}
    for item in sorted(folder.iterdir(), key=lambda f: f.name):
        if not item.name.endswith(".yml"):
            continue
        for probe in yamldata.load(item.read_text(encoding="utf-8")).get("probes") or []:
            for key in ("cmd", "cleanup"):
                if isinstance(probe.get(key), list):
                    if not all(isinstance(piece, str) for piece in probe[key]):
                        raise ValueError(f"probes/{item.name}: probe {probe.get('name')!r}: {key} pieces must be "
                                         f"strings")
                    probe = {**probe, key: "\n".join(piece.rstrip("\n") for piece in probe[key]) + "\n"}
            missing = [key for key in REQUIRED if not probe.get(key)]
            if missing:
                raise ValueError(f"probes/{item.name}: probe {probe.get('name')!r} lacks {', '.join(missing)}")
            if probe["name"] in probes:
                raise ValueError(f"probes/{item.name}: probe {probe['name']!r} is defined twice")
            if probe.get("runs", "parallel") not in RUN_MODES:
                raise ValueError(f"probes/{item.name}: probe {probe['name']!r}: runs must be one of {RUN_MODES}")
            bad = [n for n in probe.get("params") or [] if not PARAM_NAME.match(str(n))]
            if bad:
                raise ValueError(f"probes/{item.name}: probe {probe['name']!r}: parameter names {bad} are not "
                                 f"lower-case shell names")
            if probe.get("on_timeout", "error") not in TIMEOUT_MEANINGS:
                raise ValueError(f"probes/{item.name}: probe {probe['name']!r}: on_timeout must be one of "
                                 f"{TIMEOUT_MEANINGS}")
            probes[probe["name"]] = {**probe, "source": f"probes/{item.name}"}
    return probes


def ready(probe: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    """A catalogue probe as the probe runner takes it (default timeout filled in, catalogue-only keys
    dropped; ``params`` becomes the values given for it later)."""
    item = {k: v for k, v in probe.items() if k not in ("phase", "source", "description", "params")}
    if timeout is not None and "timeout" not in item:
        item["timeout"] = timeout
    if probe.get("params"):
        item["accepts"] = list(probe["params"])
    return item


def for_phase(phase: str, timeout: float | None = None, names: set[str] | None = None) -> list[dict[str, Any]]:
    """The probes of a phase, ready for ``clustereval.gpu.collect`` (default timeout filled in); only those in
    ``names`` when it is given (select before running)."""
    return [ready(probe, timeout) for probe in load().values()
            if probe["phase"] == phase and (names is None or probe["name"] in names)]


def with_params(probes: list[dict[str, Any]], values: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each probe with the values of the parameters it accepts (``accepts``) from ``values``; a probe that
    accepts a parameter no value was given for gets it empty, so its command sees a defined variable."""
    out = []
    for probe in probes:
        accepts = probe.get("accepts") or []
        bad = [n for n in [*accepts, *(probe.get("params") or {})] if not PARAM_NAME.match(str(n))]
        if bad:
            raise ValueError(f"probe {probe.get('name')!r}: parameter names {bad} are not lower-case shell names")
        item = {k: v for k, v in probe.items() if k != "accepts"}
        if accepts:
            item["params"] = {**{name: (values or {}).get(name) for name in accepts}, **(probe.get("params") or {})}
        out.append(item)
    return out
