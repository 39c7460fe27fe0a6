"""Parsers for the audit probes of our own that print ``## kind key=value ...`` section headers.

Each header opens a section holding the lines up to the next header (see :func:`sections`). Probes:

* ``probe-scheduler-commands`` (``scheduler_commands``): ``## cmd=NAME rc=N [missing=yes]`` then what
  the Slurm client command printed. Gives ``commands``: ``{name: {"rc", "missing", "output"}}``.
* ``probe-scheduler-hardware`` (``scheduler_node_hardware``): ``nproc``, ``/proc/meminfo``, ``lscpu``
  and hostname lines, then ``## findmnt root|spool`` (``findmnt -J``) and ``## df spool`` (``df -P``).
  Gives ``mounts``, ``mem_total_mb``, ``nproc``, ``sockets``, ``cores_per_socket``, ``threads_per_core``,
  ``hostname``, ``hostname_short``, ``spool`` and ``spool_used_pct`` where printed; unreadable findmnt
  JSON makes it incomplete, with the reason as its first warning.
* ``probe-health-programs`` (``health_slurm_programs``): ``## program key=K path=P exists=yes|no
  executable=yes|no`` then the program's first lines, ``## nhc path=P`` then nhc.conf lines, or one
  ``## scontrol rc=N`` when ``scontrol show config`` failed. Gives ``programs`` (``{key, path, exists,
  executable, text}``), ``nhc_paths``, ``nhc_conf`` and ``scontrol_failed`` (``{"rc"}`` or None).
* ``probe-kernel-log`` (``monitoring_kernel_log``): ``## account uid=N sudo=yes|no`` (who read), then per log
  ``## source=S rc=N lines=N`` then that log's Xid
  lines. Gives ``sources``: ``{source, rc, lines, xid_lines}``, and ``account`` (``{uid, sudo}`` or None).
* ``probe-monitoring-listeners`` (``monitoring_listeners``): ``## ss`` (``ss -ltnpH``) and ``## ps``
  (``ps -eo comm=``). Gives ``ports`` and ``processes`` (sorted) and ``ss_listed`` (ss printed a LISTEN row).
* ``probe-fleet-packages`` (``fleet_packages``): ``## manager=dpkg|rpm|none`` then ``name<TAB>version``
  rows. Gives ``manager`` (None without the header) and ``packages``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.findmnt import flatten
from clustereval.parsers.ss import sockets

LSCPU_KEYS = {"Socket(s)": "sockets", "Core(s) per socket": "cores_per_socket",
              "Thread(s) per core": "threads_per_core"}


def sections(text: str) -> list[dict[str, Any]]:
    """Split a probe's output at ``## kind key=value ...`` headers into ``{"kind", <keys>, "body"}``.

    Text before the first header lands in a section of kind ``""`` (dropped when empty); plain words after
    the kind go to ``args`` (``## findmnt root``). A header starting with ``key=value`` takes the key as its
    kind (``## cmd=sinfo rc=0`` is kind ``cmd``). Values cannot hold spaces, except the last key's.
    """
    out: list[dict[str, Any]] = [{"kind": "", "body": []}]
    for line in text.splitlines():
        if line.startswith("## "):
            words = line[3:].split(" ")
            section: dict[str, Any] = {"kind": "", "body": []}
            last = None
            for word in words:
                if "=" in word:
                    key, _, value = word.partition("=")
                    section[key] = value
                    last = key
                elif last is not None:
                    section[last] += " " + word
                elif not section["kind"]:
                    section["kind"] = word
                else:
                    section.setdefault("args", []).append(word)
            if not section["kind"] and words and "=" in words[0]:
                section["kind"] = words[0].partition("=")[0]
            out.append(section)
        else:
            out[-1]["body"].append(line)
    return out if out[0]["body"] else out[1:]


def _number(text: Any) -> int | None:
    """A (possibly negative) integer as the probe printed it; None when it is not one."""
    return int(text) if re.fullmatch(r"-?[0-9]+", str(text)) else None


@register("probe-scheduler-commands")
def parse_commands(text: str) -> dict[str, Any]:
    commands = {}
    for section in sections(text):
        if "cmd" not in section:
            continue
        commands[section["cmd"]] = {"rc": _number(section.get("rc")), "missing": section.get("missing") == "yes",
                                    "output": "\n".join(section["body"]).strip()}
    return result("probe-scheduler-commands", "sections", complete=True, commands=commands)


def _findmnt_first(body: list[str]) -> dict[str, Any] | None:
    """target/source/fstype of the first filesystem in a ``## findmnt`` section (None: findmnt found none,
    as when the path is not mounted); json.JSONDecodeError when findmnt printed no JSON."""
    tree = json.loads("\n".join(body) or "{}")
    found = flatten(tree.get("filesystems") if isinstance(tree, dict) else None)
    return {key: found[0][key] for key in ("target", "source", "fstype")} if found else None


@register("probe-scheduler-hardware")
def parse_hardware(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {"mounts": {}}
    warnings: list[str] = []
    for section in sections(text):
        body = section["body"]
        if section["kind"] == "findmnt":
            which = (section.get("args") or ["?"])[0]
            try:
                mount = _findmnt_first(body)
            except json.JSONDecodeError as exc:
                warnings.append(f"findmnt printed unreadable JSON for {which}: {exc}")
                continue
            if mount:
                out["mounts"][which] = mount
            continue
        if section["kind"] == "df":
            fields = " ".join(body).split()
            if len(fields) >= 6 and fields[4].endswith("%") and fields[4][:-1].isdigit():
                out["spool_used_pct"] = int(fields[4][:-1])
            continue
        for line in body:
            key, _, value = line.partition(":")
            value = value.strip()
            if key == "MemTotal":
                kib = re.match(r"(\d+)\s*kB", value)
                out["mem_total_mb"] = int(kib.group(1)) // 1024 if kib else None
            elif key == "nproc" and value.isdigit():
                out["nproc"] = int(value)
            elif key in ("hostname", "hostname_short", "spool"):
                out[key] = value
            elif key in LSCPU_KEYS and value.isdigit():
                out[LSCPU_KEYS[key]] = int(value)
    return result("probe-scheduler-hardware", "sections", complete=not warnings, warnings=warnings, **out)


@register("probe-health-programs")
def parse_programs(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {"programs": [], "nhc_paths": [], "nhc_conf": "", "scontrol_failed": None}
    for section in sections(text):
        if section["kind"] == "scontrol" and out["scontrol_failed"] is None:
            out["scontrol_failed"] = {"rc": section.get("rc")}
        elif section["kind"] == "program":
            out["programs"].append({"key": section.get("key"), "path": section.get("path"),
                                    "exists": section.get("exists") == "yes",
                                    "executable": section.get("executable") == "yes",
                                    "text": "\n".join(section["body"])})
        elif section["kind"] == "nhc":
            out["nhc_paths"].append(section.get("path"))
            out["nhc_conf"] += "\n".join(section["body"])
    return result("probe-health-programs", "sections", complete=True, **out)


@register("probe-kernel-log")
def parse_kernel_log(text: str) -> dict[str, Any]:
    sources = []
    account: dict[str, Any] = {}
    for section in sections(text):
        if section["kind"] == "account":
            account = {"uid": _number(section.get("uid", "")), "sudo": section.get("sudo") == "yes"}
        if "source" not in section:
            continue
        rc, lines = section.get("rc", ""), section.get("lines", "")
        sources.append({"source": section["source"], "rc": _number(rc),
                        "lines": int(lines) if re.fullmatch(r"[0-9]+", lines) else 0,
                        "xid_lines": [line for line in section["body"] if line.strip()]})
    return result("probe-kernel-log", "sections", complete=True, sources=sources, account=account or None)


@register("probe-monitoring-listeners")
def parse_listeners(text: str) -> dict[str, Any]:
    ports: set[int] = set()
    names: set[str] = set()
    listed = False
    for section in sections(text):
        if section["kind"] == "ss":
            for row in sockets("\n".join(section["body"])):
                if row["state"] != "LISTEN":
                    continue
                listed = True
                if row["port"] is not None:
                    ports.add(row["port"])
                names.update(row["processes"])
        elif section["kind"] == "ps":
            names.update(line.strip() for line in section["body"] if line.strip())
    return result("probe-monitoring-listeners", "sections", complete=True, ports=sorted(ports),
                  processes=sorted(names), ss_listed=listed)


@register("probe-fleet-packages")
def parse_packages(text: str) -> dict[str, Any]:
    manager, packages = None, {}
    for section in sections(text):
        if "manager" in section:
            manager = section["manager"].strip()
        for line in section["body"]:
            name, sep, version = line.partition("\t")
            if sep and name.strip():
                packages[name.strip()] = version.strip()
    return result("probe-fleet-packages", "sections", complete=True, manager=manager, packages=packages)
