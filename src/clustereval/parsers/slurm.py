"""Parser for Slurm command output (Slurm 17.11 to 25.11; formats checked against 22.05's format strings).

Sub-formats are detected from the text itself (``format`` in the result):

* ``scontrol_show_node`` - ``scontrol show node`` (multi-line, also with lost indentation) and
  ``scontrol -o show node`` (one line per node). ``Node X not found`` gives ``nodes: []`` with a
  warning ("node X not found"), not an error: asking for a node the controller does not know is an
  answer the checks must be able to see.
* ``scontrol_show_partition``, ``scontrol_show_job`` (multi-line or ``-o``).
* ``scontrol_show_config`` - ``Key = Value`` lines, the trailing sections (Cgroup, MPI, ...) and the
  ``Slurmctld(primary) at host is UP`` lines (``controllers``).
* ``sinfo`` - any sinfo table with a header line: the default partition view, ``-N``, ``-R``, ``-l``,
  ``-o``/``-O`` custom formats (whitespace, fixed-width or ``|``-separated). Header names map to fields.
* ``sinfo_noheader`` - ``sinfo -h`` custom formats (e.g. ``-o '%N|%t|%G|%E'``): columns are inferred
  from their values (name first, then states, GRES, ``A/I/O/T`` CPU counts, integers as CPUs then
  memory, free text as reason, a plain word as partition) and a warning says so. Callers that know the
  format can use :func:`parse_sinfo_columns`.
* ``sinfo_json`` / ``scontrol_json`` (``--json``, openapi v0.0.37 to data_parser v0.0.40+),
  ``sdiag_json``, ``sacct`` (``-P``/``-p`` pipe-separated, or the fixed-width table), ``squeue``.

Every result has ``nodes``, ``partitions``, ``jobs``, ``sacct_rows`` (lists) and ``config`` (dict).

Node shape: ``name``, ``state_raw`` (as printed), ``state``, ``base_state``, ``flags``, ``drain``,
``down``, ``not_responding``, ``reason``, ``gres`` (as printed), ``gres_gpus``, ``gres_gpu_type``,
``cpus``, ``real_memory_mb``, ``partitions`` (+ what else the format printed).

State vocabulary (one for every sub-format): ``state`` is sinfo's long state name in lower case
without suffix characters - ``idle``, ``allocated``, ``mixed``, ``down``, ``drained`` (drain flag on
an idle/down node), ``draining`` (drain flag on an allocated/mixed/completing node), ``completing``,
``fail``, ``failing``, ``reserved``, ``maint``, ``future``, ``planned``, ``powered_down``,
``unknown``, ... So scontrol ``IDLE+DRAIN`` and sinfo ``drain``/``drained`` both give ``drained``.
``base_state`` is Slurm's base state (idle/allocated/mixed/down/future/unknown/error) where the
output tells it (sinfo's ``drain`` does not), ``flags`` the upper-case flags (``DRAIN``,
``NOT_RESPONDING`` for ``*``, ``POWERED_DOWN`` for ``~``, ``MAINTENANCE`` for ``$``, ...).
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

TOOL = "slurm"
MAX_HOSTLIST = 100_000

# sinfo's short (%t) and long (%T) state names -> (state, base_state, implied flags)
_STATE_WORDS: dict[str, tuple[str, str | None, tuple[str, ...]]] = {
    "idle": ("idle", "idle", ()),
    "alloc": ("allocated", "allocated", ()), "allocated": ("allocated", "allocated", ()),
    "mix": ("mixed", "mixed", ()), "mixed": ("mixed", "mixed", ()),
    "down": ("down", "down", ()),
    "drain": ("drained", None, ("DRAIN",)), "drained": ("drained", None, ("DRAIN",)),
    "drng": ("draining", None, ("DRAIN",)), "draining": ("draining", None, ("DRAIN",)),
    "comp": ("completing", None, ("COMPLETING",)), "completing": ("completing", None, ("COMPLETING",)),
    "resv": ("reserved", None, ("RESERVED",)), "reserved": ("reserved", None, ("RESERVED",)),
    "maint": ("maint", None, ("MAINTENANCE",)),
    "fail": ("fail", None, ("FAIL",)), "failg": ("failing", None, ("FAIL",)),
    "failing": ("failing", None, ("FAIL",)),
    "futr": ("future", "future", ()), "future": ("future", "future", ()),
    "plnd": ("planned", None, ("PLANNED",)), "planned": ("planned", None, ("PLANNED",)),
    "unk": ("unknown", "unknown", ()), "unknown": ("unknown", "unknown", ()),
    "error": ("error", "error", ()),
    "npc": ("perfctrs", None, ("PERFCTRS",)), "perfctrs": ("perfctrs", None, ("PERFCTRS",)),
    "pow_dn": ("powered_down", None, ("POWERED_DOWN",)),
    "powered_down": ("powered_down", None, ("POWERED_DOWN",)),
    "power_down": ("powered_down", None, ("POWERED_DOWN",)),
    "powering_down": ("powering_down", None, ("POWERING_DOWN",)),
    "pow_up": ("powering_up", None, ("POWERING_UP",)), "powering_up": ("powering_up", None, ("POWERING_UP",)),
    "boot": ("rebooting", None, ("REBOOT_ISSUED",)), "reboot": ("rebooting", None, ("REBOOT_ISSUED",)),
    "reboot_issued": ("rebooting", None, ("REBOOT_ISSUED",)),
    "reboot_requested": ("reboot_requested", None, ("REBOOT_REQUESTED",)),
    "inval": ("invalid", None, ("INVALID",)), "invalid": ("invalid", None, ("INVALID",)),
    "blocked": ("blocked", None, ("BLOCKED",)),
}
_BASE_STATES = {"idle", "allocated", "mixed", "down", "future", "unknown", "error"}
_SUFFIX_FLAGS = {"*": "NOT_RESPONDING", "~": "POWERED_DOWN", "#": "POWERING_UP", "!": "POWER_DOWN",
                 "%": "POWERING_DOWN", "$": "MAINTENANCE", "@": "REBOOT_REQUESTED", "^": "REBOOT_ISSUED",
                 "-": "PLANNED"}


def _is_state(token: str) -> bool:
    word = token.strip().split("+")[0].rstrip("".join(_SUFFIX_FLAGS)).lower()
    return word in _STATE_WORDS


def normalise_state(raw: str | None) -> dict[str, Any]:
    """Map a Slurm node state as sinfo or scontrol prints it to the vocabulary in the module docstring."""
    out: dict[str, Any] = {"state_raw": raw, "state": None, "base_state": None, "flags": [],
                           "drain": False, "down": False, "not_responding": False}
    if raw is None or not raw.strip():
        return out
    raw = raw.strip()
    flags: list[str] = []
    tokens = [tok for tok in raw.split("+") if tok]
    words = []
    for token in tokens:
        stripped = token.rstrip("".join(_SUFFIX_FLAGS))
        for char in token[len(stripped):]:
            if _SUFFIX_FLAGS[char] not in flags:
                flags.append(_SUFFIX_FLAGS[char])
        words.append(stripped)
    if not words:
        return out
    first = words[0].lower()
    state, base, implied = _STATE_WORDS.get(first, (first, None, ()))
    for flag in implied:
        if flag not in flags:
            flags.append(flag)
    for extra in words[1:]:
        flag = extra.upper()
        if flag == "MAINT":
            flag = "MAINTENANCE"
        if flag not in flags:
            flags.append(flag)
    if base in _BASE_STATES and len(words) > 1:
        # scontrol prints base+flags (IDLE+DRAIN); derive the summary state the way sinfo names it
        if "DRAIN" in flags:
            busy = base in ("allocated", "mixed") or "COMPLETING" in flags
            state = "draining" if busy else "drained"
        elif "FAIL" in flags:
            state = "failing" if base in ("allocated", "mixed") else "fail"
        elif base == "down":
            state = "down"
        elif "COMPLETING" in flags:
            state = "completing"
    out.update(state=state, base_state=base, flags=flags, drain="DRAIN" in flags,
               down=base == "down" or state == "down", not_responding="NOT_RESPONDING" in flags)
    return out


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets/parentheses."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "([":
            depth += 1
        elif char in ")]":
            depth = max(0, depth - 1)
        if char == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p != ""]


def parse_gres(gres: str | None) -> tuple[int | None, str | None]:
    """GPU count and type(s) from a GRES string: ``gpu:h100:8(S:0-1)``, ``gpu:8``, ``gpu:a:4,gpu:b:2``.

    ``(null)`` or an empty string mean no GRES (0 GPUs); ``None`` (not printed) gives ``(None, None)``.
    """
    if gres is None:
        return None, None
    total, types = 0, []
    for entry in _split_top(gres.strip()):
        entry = re.sub(r"\(.*?\)", "", entry.strip())
        parts = entry.split(":")
        if parts[0].strip().lower() != "gpu":
            continue
        count = 1
        rest = parts[1:]
        if rest and re.fullmatch(r"\d+", rest[-1].strip()):
            count = int(rest[-1])
            rest = rest[:-1]
        if rest and rest[0] and rest[0] not in types:
            types.append(rest[0])
        total += count
    return total, (",".join(types) if types else None)


def expand_hostlist(hostlist: str, limit: int = MAX_HOSTLIST) -> list[str]:
    """Expand a Slurm hostlist (``cu[201-204]``, ``node[01-03,7],gpu5``) into names, at most ``limit``."""
    names: list[str] = []
    for part in _split_top(hostlist.strip()):
        expanded = [""]
        for prefix, body in re.findall(r"([^\[]*)(?:\[([^\]]*)\])?", part):
            if not prefix and body == "":
                continue
            choices = [prefix]
            if body:
                choices = []
                for rng in body.split(","):
                    lo, _, hi = rng.partition("-")
                    if lo.isdigit() and hi.isdigit() and int(hi) >= int(lo):
                        width = len(lo)
                        stop = min(int(hi), int(lo) + limit)
                        choices.extend(f"{prefix}{i:0{width}d}" for i in range(int(lo), stop + 1))
                    elif lo.isdigit() and not hi:
                        choices.append(prefix + lo)
                    else:
                        choices.append(f"{prefix}[{rng}]")
                    if len(choices) > limit:
                        break
            expanded = [a + b for a in expanded for b in choices][: limit + 1]
        names.extend(expanded)
        if len(names) > limit:
            break
    return names[:limit]


def _node(name: str, state_raw: str | None = None, **fields: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"name": name}
    node.update(normalise_state(state_raw))
    gres = fields.pop("gres", None)
    gpus, gpu_type = parse_gres(gres)
    node.update(reason=None, gres=gres, gres_gpus=gpus, gres_gpu_type=gpu_type, cpus=None,
                real_memory_mb=None, partitions=[])
    node.update({k: v for k, v in fields.items() if v is not None or k not in node})
    return node


def _null(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return None if value in ("", "(null)", "N/A", "none", "None") else value


def _split_reason(reason: str | None) -> tuple[str | None, str | None, str | None]:
    """``Low RealMemory [root@2022-05-18T17:20:20]`` -> (reason, user, time)."""
    reason = _null(reason)
    if reason is None:
        return None, None, None
    match = re.match(r"^(.*?)\s*\[([^\]@]*)@([^\]]*)\]\s*$", reason)
    if match:
        return match.group(1), match.group(2), match.group(3)
    return reason, None, None


# --------------------------------------------------------------------------- scontrol key=value records

_KEY_SPLIT = re.compile(r"(?<!\s)\s+(?=[A-Z][A-Za-z0-9_:/.]*=)")
_FREE_TEXT_KEYS = ("OS=", "Reason=", "Comment=", "Extra=", "Command=", "WorkDir=", "StdErr=", "StdOut=",
                   "StdIn=")


def _kv_line(line: str) -> list[tuple[str, str]]:
    stripped = line.strip()
    if stripped.startswith(_FREE_TEXT_KEYS) and "\n" not in stripped:
        # multi-line scontrol puts free-text values on a line of their own; keep them whole
        key, _, value = stripped.partition("=")
        if not _KEY_SPLIT.search(value) or key == "OS":
            return [(key, value.strip())]
    pairs = []
    for token in _KEY_SPLIT.split(stripped):
        key, sep, value = token.partition("=")
        if sep:
            pairs.append((key, value.strip()))
        elif pairs:
            pairs[-1] = (pairs[-1][0], f"{pairs[-1][1]} {token}".strip())
    return pairs


def _records(text: str, first_key: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Split scontrol output into records starting at ``first_key=``; returns (records, stray lines)."""
    records: list[dict[str, Any]] = []
    stray: list[str] = []
    current: dict[str, Any] | None = None
    last_key = None
    for line in text.split("\n"):
        if not line.strip():
            continue
        if line.strip().startswith(first_key + "="):
            current = {"_details": []}
            records.append(current)
        elif current is None:
            stray.append(line.strip())
            continue
        pairs = _kv_line(line)
        if not pairs:
            if last_key is not None:  # continuation of a multi-line value (e.g. a long Reason)
                current[last_key] = f"{current[last_key]} {line.strip()}".strip()
            continue
        if pairs[0][0] == "Nodes" and first_key == "JobId" and line.startswith((" ", "\t")):
            current["_details"].append(dict(pairs))
            continue
        for key, value in pairs:
            current[key] = value
            last_key = key
    return records, stray


def _node_from_record(rec: dict[str, Any]) -> dict[str, Any]:
    reason, user, when = _split_reason(rec.get("Reason"))
    partitions = [p for p in (rec.get("Partitions") or "").split(",") if p]
    fields = {k: v for k, v in rec.items() if not k.startswith("_")}
    return _node(
        rec.get("NodeName", ""), rec.get("State"), gres=rec.get("Gres"), reason=reason, reason_user=user,
        reason_time=when, cpus=to_int(rec.get("CPUTot")), cpus_alloc=to_int(rec.get("CPUAlloc")),
        cpus_effective=to_int(rec.get("CPUEfctv")), cpu_load=to_float(rec.get("CPULoad")),
        real_memory_mb=to_int(rec.get("RealMemory")), alloc_memory_mb=to_int(rec.get("AllocMem")),
        free_memory_mb=to_int(rec.get("FreeMem")), partitions=partitions, gres_used=rec.get("GresUsed"),
        version=rec.get("Version"), arch=rec.get("Arch"), features=_null(rec.get("AvailableFeatures")),
        sockets=to_int(rec.get("Sockets")), cores_per_socket=to_int(rec.get("CoresPerSocket")),
        threads_per_core=to_int(rec.get("ThreadsPerCore")), cfg_tres=rec.get("CfgTRES"),
        alloc_tres=rec.get("AllocTRES"), boot_time=rec.get("BootTime"), comment=_null(rec.get("Comment")),
        fields=fields)


def _parse_show_node(text: str) -> dict[str, Any]:
    records, stray = _records(text, "NodeName")
    warnings = [f"line not understood: {line[:200]}" for line in stray if not line.startswith("Node data as")]
    nodes, complete = [], True
    for rec in records:
        tail_keys = ("CfgTRES", "AllocTRES", "CapWatts", "CurrentWatts")
        if "State" not in rec or not any(k in rec for k in tail_keys):
            complete = False
            warnings.append(f"node record {rec.get('NodeName')!r} is cut short (no State/CfgTRES lines)")
        nodes.append(_node_from_record(rec))
    return _envelope("scontrol_show_node", complete, warnings, nodes=nodes)


def _parse_show_partition(text: str) -> dict[str, Any]:
    records, stray = _records(text, "PartitionName")
    warnings = [f"line not understood: {line[:200]}" for line in stray]
    partitions = []
    for rec in records:
        fields = {k: v for k, v in rec.items() if not k.startswith("_")}
        partitions.append({
            "name": rec.get("PartitionName"), "state": (rec.get("State") or "").lower() or None,
            "default": rec.get("Default") == "YES", "nodes": _null(rec.get("Nodes")),
            "total_cpus": to_int(rec.get("TotalCPUs")), "total_nodes": to_int(rec.get("TotalNodes")),
            "max_time": rec.get("MaxTime"), "tres": rec.get("TRES"), "fields": fields})
    complete = all("State" in p["fields"] for p in partitions)
    if not complete:
        warnings.append("a partition record is cut short (no State=)")
    return _envelope("scontrol_show_partition", complete, warnings, partitions=partitions)


def _tres_value(tres: str | None, key: str) -> int | None:
    for item in (tres or "").split(","):
        name, _, value = item.partition("=")
        if name == key:
            return to_int(value)
    return None


def _parse_show_job(text: str) -> dict[str, Any]:
    records, stray = _records(text, "JobId")
    warnings = [f"line not understood: {line[:200]}" for line in stray]
    jobs = []
    for rec in records:
        fields = {k: v for k, v in rec.items() if not k.startswith("_")}
        user = rec.get("UserId")
        jobs.append({
            "job_id": rec.get("JobId"), "name": rec.get("JobName"),
            "user": user.split("(")[0] if user else None, "state": rec.get("JobState"),
            "reason": _null(rec.get("Reason")), "partition": rec.get("Partition"),
            "nodelist": _null(rec.get("NodeList")), "num_nodes": to_int(rec.get("NumNodes")),
            "num_cpus": to_int(rec.get("NumCPUs")),
            "gpus": (_tres_value(rec.get("AllocTRES"), "gres/gpu")
                     or _tres_value(rec.get("ReqTRES"), "gres/gpu")),
            "run_time": rec.get("RunTime"), "time_limit": rec.get("TimeLimit"),
            "exit_code": rec.get("ExitCode"),
            "node_details": rec["_details"], "fields": fields})
    complete = all(j["state"] is not None for j in jobs)
    if not complete:
        warnings.append("a job record is cut short (no JobState=)")
    return _envelope("scontrol_show_job", complete, warnings, jobs=jobs)


# --------------------------------------------------------------------------- scontrol show config

_CTLD_NEW = re.compile(r"^Slurmctld\((?P<role>[^)]*)\) at (?P<host>\S+) is (?P<status>\S+)")
_CTLD_OLD = re.compile(r"^Slurmctld\(primary/backup\) at (?P<hosts>\S+) are (?P<status>\S+)")


def _parse_show_config(text: str) -> dict[str, Any]:
    config: dict[str, str] = {}
    sections: dict[str, dict[str, str]] = {}
    target = config
    controllers: list[dict[str, str]] = []
    warnings: list[str] = []
    as_of = None
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("Configuration data as of"):
            as_of = stripped[len("Configuration data as of"):].strip()
            continue
        match = _CTLD_NEW.match(stripped)
        if match:
            controllers.append(match.groupdict())
            continue
        match = _CTLD_OLD.match(stripped)
        if match:
            hosts, states = match.group("hosts").split("/"), match.group("status").split("/")
            for role, host, status in zip(("primary", "backup"), hosts, states, strict=False):
                if host != "(NULL)":
                    controllers.append({"role": role, "host": host, "status": status})
            continue
        if " = " in stripped or stripped.endswith(" ="):
            key, _, value = stripped.partition("=")
            target[key.strip()] = value.strip()
            continue
        if stripped.endswith(":") and "=" not in stripped:
            target = sections.setdefault(stripped[:-1], {})
            continue
        warnings.append(f"line not understood: {stripped[:200]}")
    if not config:
        raise ParseError("no 'Key = Value' lines found in what looks like scontrol show config output")
    complete = bool(controllers)
    if not complete:
        warnings.append("no 'Slurmctld(...) at ... is UP/DOWN' line at the end: the output may be cut short")
    return _envelope("scontrol_show_config", complete, warnings, config=config, config_sections=sections,
                     controllers=controllers, config_as_of=as_of, slurm_version=config.get("SLURM_VERSION"))


# --------------------------------------------------------------------------- sinfo tables

_SINFO_HEADERS = {
    "HOSTNAMES": "hostname", "NODELIST": "nodelist", "NODE_ADDR": "node_addr", "STATE": "state",
    "GRES": "gres", "GRES_USED": "gres_used", "CPUS": "cpus", "MEMORY": "real_memory_mb",
    "PARTITION": "partition", "REASON": "reason", "USER": "reason_user", "TIMESTAMP": "reason_time",
    "AVAIL": "avail", "TIMELIMIT": "timelimit", "NODES": "nodes_count", "CPUS(A/I/O/T)": "cpus_state",
    "S:C:T": "sct", "FREE_MEM": "free_memory_mb", "CPU_LOAD": "cpu_load", "VERSION": "version",
    "AVAIL_FEATURES": "features", "ACTIVE_FEATURES": "active_features", "WEIGHT": "weight",
    "TMP_DISK": "tmp_disk_mb", "SOCKETS": "sockets", "CORES": "cores_per_socket",
    "THREADS": "threads_per_core",
    "NODES(A/I)": "nodes_ai", "NODES(A/I/O/T)": "nodes_aiot", "CLUSTER": "cluster", "JOB_SIZE": "job_size",
    "ROOT": "root", "OVERSUBSCRIBE": "oversubscribe", "OVERSUBS": "oversubscribe", "GROUPS": "groups",
    "STATE_LONG": "state",
}
_INT_FIELDS = {"cpus", "real_memory_mb", "nodes_count", "free_memory_mb", "weight", "tmp_disk_mb", "sockets",
               "cores_per_socket", "threads_per_core"}


def _is_sinfo_header(tokens: list[str]) -> bool:
    known = sum(1 for tok in tokens if tok.strip().upper() in _SINFO_HEADERS)
    return known >= 2 and known >= len(tokens) * 0.5 and any(
        tok.strip().upper() in ("NODELIST", "HOSTNAMES", "REASON", "PARTITION") for tok in tokens)


def _split_row(line: str, ncols: int, reason_index: int | None, pipe: bool) -> list[str] | None:
    if pipe:
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == ncols + 1 and cells[-1] == "":
            cells = cells[:-1]
        return cells if len(cells) == ncols else None
    tokens = line.split()
    if reason_index is None:
        cells = line.split(None, ncols - 1)
        return cells if len(cells) == ncols else None
    right = ncols - reason_index - 1
    if len(tokens) < ncols:
        return None
    left_cells = tokens[:reason_index]
    right_cells = tokens[len(tokens) - right:] if right else []
    middle = " ".join(tokens[reason_index:len(tokens) - right])
    return [*left_cells, middle, *right_cells]


def _rows_to_nodes(rows: list[dict[str, str]], warnings: list[str]) -> list[dict[str, Any]]:
    nodes: dict[str, dict[str, Any]] = {}
    budget = MAX_HOSTLIST  # bounds the work on hostile input (a real cluster has far fewer nodes)
    for row in rows:
        names: list[str] = []
        if row.get("hostname"):
            names = [row["hostname"]]
        elif row.get("nodelist"):
            names = expand_hostlist(row["nodelist"], limit=max(budget, 1))
            if len(names) >= budget:
                warnings.append(f"hostlist {row['nodelist'][:80]} expanded to the first "
                                f"{budget} names only")
        budget -= len(names)
        if budget < 0:
            break
        partition = row.get("partition")
        partition = partition.rstrip("*") if partition else None
        reason, user, when = _split_reason(row.get("reason"))
        if not names:
            continue
        fields: dict[str, Any] = {
            "gres": row.get("gres"), "reason": reason, "cpus": to_int(row.get("cpus")),
            "real_memory_mb": to_int(row.get("real_memory_mb"))}
        if user or row.get("reason_user"):
            fields["reason_user"] = user or row.get("reason_user")
        if when or row.get("reason_time"):
            fields["reason_time"] = when or row.get("reason_time")
        for key in ("gres_used", "cpus_state", "free_memory_mb", "cpu_load", "version", "features",
                    "state_long_raw"):
            if key in row:
                value = row[key]
                if key == "free_memory_mb":
                    fields[key] = to_int(value)
                elif key == "cpu_load":
                    fields[key] = to_float(value)
                else:
                    fields[key] = value
        # one row of the partition view can name thousands of nodes: build the node once, copy it
        template = _node(names[0], row.get("state"), **fields)
        for name in names:
            existing = nodes.get(name)
            if existing is None:
                existing = dict(template, name=name, flags=list(template["flags"]), partitions=[])
                nodes[name] = existing
            if partition and partition not in existing["partitions"]:
                existing["partitions"].append(partition)
    return list(nodes.values())


def _table_rows(lines: list[str], header: list[str], pipe: bool, warnings: list[str]) -> list[dict[str, str]]:
    names, seen_state = [], False
    for token in header:
        key = _SINFO_HEADERS.get(token.strip().upper(), token.strip().lower())
        if key == "state":
            key = "state_long_raw" if seen_state else "state"
            seen_state = True
        names.append(key)
    reason_index = names.index("reason") if "reason" in names else None
    rows = []
    for number, line in enumerate(lines, start=2):
        if not line.strip():
            continue
        cells = _split_row(line, len(names), reason_index, pipe)
        if cells is None:
            warnings.append(f"line {number} does not match the header ({len(names)} columns): "
                            f"{line.strip()[:160]}")
            continue
        row: dict[str, str] = {}
        for key, cell in zip(names, cells, strict=False):
            row.setdefault(key, cell.strip())
        rows.append(row)
    return rows


def _parse_sinfo(lines: list[str], header_index: int) -> dict[str, Any]:
    warnings: list[str] = []
    header_line = lines[header_index]
    pipe = "|" in header_line
    header = [h for h in header_line.split("|")] if pipe else header_line.split()
    if pipe and header and not header[-1].strip():
        header = header[:-1]
    rows = _table_rows(lines[header_index + 1:], header, pipe, warnings)
    nodes = _rows_to_nodes(rows, warnings)
    partitions = []
    if "avail" in {k for row in rows for k in row} and any("partition" in row for row in rows):
        for row in rows:
            name = row.get("partition", "")
            partitions.append({"name": name.rstrip("*"), "default": name.endswith("*"),
                               "avail": row.get("avail"), "timelimit": row.get("timelimit"),
                               "nodes_count": to_int(row.get("nodes_count")),
                               **normalise_state(row.get("state")), "nodelist": row.get("nodelist")})
    complete = not warnings or all("expanded to" in w for w in warnings)
    return _envelope("sinfo", complete, warnings, nodes=nodes, partitions=partitions)


def _column_kind(values: list[str]) -> str:
    present = [v for v in values if v]
    if not present:
        return "empty"
    if all(_is_state(v) for v in present):
        return "state"
    if all(re.fullmatch(r"\d+/\d+/\d+/\d+", v) for v in present):
        return "cpus_state"
    if all(v == "(null)" or re.match(r"^[A-Za-z_][\w.-]*:", v) for v in present) and any(
            "gpu" in v or v == "(null)" for v in present):
        return "gres_used" if any("IDX" in v for v in present) else "gres"
    if all(re.fullmatch(r"\d+", v) for v in present):
        return "int"
    if any(" " in v or v.lower() == "none" for v in present):
        return "reason"
    return "word"


def parse_sinfo_columns(text: str, columns: list[str], pipe: bool | None = None) -> dict[str, Any]:
    """Parse header-less sinfo output whose columns the caller knows (``columns``: field names such as
    ``["hostname", "state", "gres", "reason"]`` in the order of the ``-o``/``-O`` format)."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if pipe is None:
        pipe = any("|" in ln for ln in lines)
    warnings: list[str] = []
    header = [name.upper() for name in columns]
    rows = []
    for row in _table_rows(lines, header, pipe, warnings):
        rows.append({k.lower(): v for k, v in row.items()})
    nodes = _rows_to_nodes(rows, warnings)
    return _envelope("sinfo_noheader", not warnings, warnings, nodes=nodes)


def _parse_sinfo_noheader(lines: list[str]) -> dict[str, Any]:
    pipe = all("|" in ln for ln in lines)
    split = [[c.strip() for c in ln.split("|")] if pipe else ln.split() for ln in lines]
    width = max(len(r) for r in split)
    if pipe and all(r[-1] == "" for r in split if len(r) == width):
        width -= 1
    counts: dict[int, int] = {}
    for row in split:
        counts[len(row)] = counts.get(len(row), 0) + 1
    width = max(counts, key=lambda k: counts[k])
    if width < 2:
        raise ParseError("slurm output not recognised: no header line and a single column "
                         "(expected sinfo, scontrol, sacct -P or squeue output)")
    if not pipe and any(len(r) != width for r in split):
        raise ParseError("slurm output not recognised: no header line and rows of different widths")
    good = [r[:width] for r in split if len(r) >= width]
    columns = list(zip(*good, strict=False))
    kinds = [_column_kind(list(col)) for col in columns]
    names: list[str] = ["nodelist" if any("[" in v for v in columns[0]) else "hostname"]
    ints = iter(["cpus", "real_memory_mb"])
    seen: set[str] = set()
    for kind in kinds[1:]:
        if kind == "int":
            name = next(ints, "ignored")
        elif kind == "word":
            name = "ignored" if "partition" in seen else "partition"
        elif kind in ("state", "gres"):
            second = {"state": "state_long_raw", "gres": "gres_used"}[kind]
            name = second if kind in seen else kind
        else:
            name = {"empty": "ignored"}.get(kind, kind)
        names.append(name if name not in seen else "ignored")
        seen.add(name)
    if "state" not in seen and "gres" not in seen and "reason" not in seen and "cpus_state" not in seen:
        raise ParseError("slurm output not recognised: no header line and no column looks like a node "
                         "state, GRES or reason (expected sinfo, scontrol, sacct -P or squeue output)")
    out = parse_sinfo_columns("\n".join(lines), names, pipe=pipe)
    out["warnings"].insert(0, "no header line: columns inferred from their values as "
                              + ", ".join(n for n in names))
    out["inferred_columns"] = names
    return out


# --------------------------------------------------------------------------- sacct, squeue


def _parse_sacct_pipe(lines: list[str]) -> dict[str, Any]:
    header = lines[0].split("|")
    trailing = header[-1] == ""
    if trailing:
        header = header[:-1]
    rows, warnings = [], []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("|")
        if trailing and len(cells) == len(header) + 1 and cells[-1] == "":
            cells = cells[:-1]
        if len(cells) != len(header):
            warnings.append(f"sacct line {number} has {len(cells)} fields, the header has {len(header)}; "
                            f"skipped: {line[:120]}")
            continue
        rows.append(dict(zip(header, cells, strict=True)))
    return _envelope("sacct", not warnings, warnings, sacct_rows=rows, sacct_columns=header)


def _parse_fixed(lines: list[str], dash_index: int) -> tuple[list[str], list[dict[str, str]]]:
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", lines[dash_index])]
    header = [lines[dash_index - 1][a:b].strip() for a, b in spans]
    rows = []
    for line in lines[dash_index + 1:]:
        if not line.strip():
            continue
        rows.append({h: line[a:b + 1].strip() for h, (a, b) in zip(header, spans, strict=True)})
    return header, rows


def _parse_squeue(lines: list[str], header_index: int) -> dict[str, Any]:
    header = lines[header_index].split()
    keys = [re.sub(r"[^a-z0-9]+", "_", h.lower()).strip("_") for h in header]
    jobs, warnings = [], []
    for number, line in enumerate(lines[header_index + 1:], start=header_index + 2):
        if not line.strip():
            continue
        cells = line.split(None, len(keys) - 1)
        if len(cells) != len(keys):
            warnings.append(f"squeue line {number} has {len(cells)} columns, expected {len(keys)}: "
                            f"{line[:120]}")
            continue
        row = dict(zip(keys, cells, strict=True))
        row["job_id"] = row.get("jobid")
        row["state"] = row.get("st") or row.get("state")
        jobs.append(row)
    return _envelope("squeue", not warnings, warnings, jobs=jobs)


# --------------------------------------------------------------------------- JSON


def _json_state(raw: Any, flags: Any) -> str | None:
    if isinstance(raw, list):
        parts = [str(x) for x in raw]
    elif isinstance(raw, str):
        parts = [raw]
    else:
        return None
    if isinstance(flags, list):
        parts += [str(f) for f in flags]
    return "+".join(parts) if parts else None


def _json_node(raw: dict[str, Any]) -> dict[str, Any]:
    partitions = raw.get("partitions")
    reason = raw.get("reason") if isinstance(raw.get("reason"), str) else None
    return _node(str(raw.get("name", "")), _json_state(raw.get("state"), raw.get("state_flags")),
                 gres=raw.get("gres") if isinstance(raw.get("gres"), str) else None,
                 reason=_null(reason), cpus=to_int(str(raw.get("cpus"))),
                 real_memory_mb=to_int(str(raw.get("real_memory"))),
                 partitions=[str(p) for p in partitions] if isinstance(partitions, list) else [],
                 gres_used=raw.get("gres_used") if isinstance(raw.get("gres_used"), str) else None,
                 version=raw.get("slurmd_version") or raw.get("version"),
                 alloc_cpus=to_int(str(raw.get("alloc_cpus"))), cpu_load=to_float(str(raw.get("cpu_load"))))


def _version(meta: Any) -> str | None:
    if isinstance(meta, dict):
        slurm = meta.get("Slurm") or meta.get("slurm")
        if isinstance(slurm, dict) and isinstance(slurm.get("release"), str):
            return slurm["release"]
    return None


def _parse_json(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        if "\n" not in text[exc.pos:].rstrip() or not text[exc.pos:].strip():
            size = len(text.encode("utf-8", "replace"))
            raise ParseError(f"slurm --json output is truncated at byte {size}: "
                             f"{exc.msg}") from None
        raise ParseError(f"slurm --json output is malformed at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg}") from None
    if not isinstance(doc, dict):
        raise ParseError("slurm --json output is not a JSON object")
    version = _version(doc.get("meta"))
    warnings = [f"slurm reported: {e}" for e in doc.get("errors") or [] if e] if isinstance(
        doc.get("errors"), list) else []
    if isinstance(doc.get("statistics"), dict):
        return _envelope("sdiag_json", True, warnings, statistics=doc["statistics"], slurm_version=version)
    if isinstance(doc.get("nodes"), list):
        nodes = [_json_node(n) for n in doc["nodes"] if isinstance(n, dict)]
        command = (doc.get("meta") or {}).get("command") if isinstance(doc.get("meta"), dict) else None
        fmt = "scontrol_json" if isinstance(command, list) and "scontrol" in command else "sinfo_json"
        return _envelope(fmt, True, warnings, nodes=nodes, slurm_version=version)
    if isinstance(doc.get("sinfo"), list):
        nodes = _sinfo_v40_nodes(doc["sinfo"])
        return _envelope("sinfo_json", True, warnings, nodes=nodes, slurm_version=version)
    if isinstance(doc.get("jobs"), list):
        jobs = [{"job_id": j.get("job_id"), "name": j.get("name"), "state": j.get("job_state"),
                 "partition": j.get("partition"), "nodelist": j.get("nodes")}
                for j in doc["jobs"] if isinstance(j, dict)]
        return _envelope("jobs_json", True, warnings, jobs=jobs, slurm_version=version)
    raise ParseError("slurm --json output has none of 'nodes', 'sinfo', 'jobs' or 'statistics'")


def _sinfo_v40_nodes(entries: list[Any]) -> list[dict[str, Any]]:
    """sinfo --json from data_parser v0.0.40+: one entry per (partition, state) group of nodes."""
    nodes: dict[str, dict[str, Any]] = {}

    def sub(entry: dict[str, Any], key: str, inner: str) -> Any:
        value = entry.get(key)
        return value.get(inner) if isinstance(value, dict) else None

    for entry in entries:
        if not isinstance(entry, dict):
            continue
        names = sub(entry, "nodes", "nodes")
        if not isinstance(names, list):
            continue
        state = _json_state(sub(entry, "node", "state"), None)
        partition = sub(entry, "partition", "name")
        for name in names:
            node = nodes.get(str(name))
            if node is None:
                node = _node(str(name), state, gres=sub(entry, "gres", "total"),
                             reason=_null(sub(entry, "reason", "description")),
                             cpus=to_int(str(sub(entry, "cpus", "total"))),
                             real_memory_mb=to_int(str(sub(entry, "memory", "maximum"))))
                nodes[str(name)] = node
            if isinstance(partition, str) and partition not in node["partitions"]:
                node["partitions"].append(partition)
    return list(nodes.values())


# --------------------------------------------------------------------------- entry point


def _envelope(fmt: str, complete: bool, warnings: list[str], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"nodes": [], "partitions": [], "jobs": [], "sacct_rows": [], "config": {}}
    base.update(fields)
    return result(TOOL, fmt, complete=complete, warnings=warnings, **base)


@register("slurm")
def parse(text: str) -> dict[str, Any]:
    """Parse Slurm command output, detecting which command printed it (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("the slurm output is empty")
    stripped = text.strip()
    if stripped.startswith("{"):
        return _parse_json(stripped)
    lines = [ln for ln in text.split("\n")]
    nonblank = [ln for ln in lines if ln.strip()]
    not_found = re.match(r"^(Node|Partition|Job(?: ID)?) (\S+) not found", nonblank[0].strip())
    if not_found and len(nonblank) == 1:
        kind, name = not_found.group(1), not_found.group(2)
        fmt = {"Node": "scontrol_show_node", "Partition": "scontrol_show_partition"}.get(
            kind, "scontrol_show_job")
        return _envelope(fmt, True, [f"{kind.lower()} {name} not found"])
    starts = [ln.strip().split("=", 1)[0] for ln in nonblank]
    if "NodeName" in starts:
        return _parse_show_node(text)
    if "PartitionName" in starts:
        return _parse_show_partition(text)
    if "JobId" in starts:
        return _parse_show_job(text)
    config_like = sum(" = " in ln for ln in nonblank) > len(nonblank) / 2
    if nonblank[0].startswith("Configuration data as of") or config_like:
        return _parse_show_config(text)
    first = nonblank[0]
    if "|" in first and re.search(r"(^|\|)(JobID|JobIDRaw)(\||$)", first):
        return _parse_sacct_pipe(nonblank)
    for index, line in enumerate(nonblank[:3]):
        tokens = line.split("|") if "|" in line else line.split()
        upper = [t.strip().upper() for t in tokens]
        if "JOBID" in upper and ("ST" in upper or "STATE" in upper or "PARTITION" in upper):
            if index + 1 < len(nonblank) and re.fullmatch(r"[-\s]+", nonblank[index + 1]):
                header, rows = _parse_fixed(nonblank, index + 1)
                return _envelope("sacct", True, [], sacct_rows=rows, sacct_columns=header)
            return _parse_squeue(nonblank, index)
        if _is_sinfo_header(tokens):
            return _parse_sinfo(nonblank, index)
    return _parse_sinfo_noheader(nonblank)
