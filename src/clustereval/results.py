"""The check result: the contract between roles, the callback, scoring and reports.

One JSON object per check, subject and variant, appended to ``results.jsonl`` in the run directory and
flushed as soon as the result is known. See ``docs/engine.md`` for every field.

* ``subject``: what the result is about (:func:`subject_hosts` reads it): a host (``node3``), a GPU or other
  component of a host (``node3/gpu5``), an ordered pair of hosts (``node1->node2``), a set of hosts
  (``node1+node2+node4``), a named thing that is not a host (``tier:home``), or ``_cluster``.
* ``params``: the variant (collective, world size, message sizes, storage tier, clients...). A result is
  identified by (check, subject, params): a re-run of the same variant supersedes the earlier line,
  different variants never do.
* ``series``: files under ``series/`` holding a curve or a time series (CSV with a header row), each
  described as ``{"path", "kind": "curve"|"timeseries", "x", "columns", "rows"}``.
* ``measured``: when the measured thing started and ended (not when the judge ran), and timestamped
  ``events`` (``{"at", "event", ...}``) for tests that time a process.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import math
import operator
import os
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from clustereval import private

STATUSES = ("pass", "warn", "fail", "skip", "error")


class Status(StrEnum):
    """A result's status, ordered from best to worst: pass < skip < warn < error < fail.

    ``worst()`` of several sub-verdicts is the one a combined verdict must carry; reports list results
    worst first. A skip (nothing to judge) is worse than a pass and better than any finding; an error
    (the harness failed) is worse than a warn and better than a fail (a fail is evidence against the
    cluster, an error is none). Any other string ranks as an error.
    """

    PASS = "pass"
    SKIP = "skip"
    WARN = "warn"
    ERROR = "error"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return _RANK[self.value]

    def __lt__(self, other: object) -> bool:
        return rank(self) < rank(other)

    def __le__(self, other: object) -> bool:
        return rank(self) <= rank(other)

    def __gt__(self, other: object) -> bool:
        return rank(self) > rank(other)

    def __ge__(self, other: object) -> bool:
        return rank(self) >= rank(other)

    __hash__ = StrEnum.__hash__


_RANK = {"pass": 0, "skip": 1, "warn": 2, "error": 3, "fail": 4}


def rank(status: object) -> int:
    """The position of ``status`` from best (0, pass) to worst (4, fail); unknown strings rank as error."""
    return _RANK.get(str(status), _RANK["error"])


def worst(*statuses: object) -> str:
    """The worst of the statuses given (each a str or :class:`Status`; lists, generators and other iterables are
    flattened); ``pass`` for none."""
    flat: list[object] = []
    for item in statuses:
        flat.extend(item if isinstance(item, Iterable) and not isinstance(item, str | bytes) else [item])
    return str(max(flat, key=rank)) if flat else "pass"


def worst_first(status: object) -> int:
    """Sort key putting the worst status first (fail, error, warn, skip, pass)."""
    return -rank(status)

SEVERITIES = ("critical", "major", "minor", "info")
PHASES = ("audit", "performance", "reliability")
CLUSTER_SUBJECT = "_cluster"
RESULTS_FILE = "results.jsonl"
# The task-result key carrying a task's results, as one JSON string: Ansible walks and tags every nested
# value of a task result before each callback, which cost 0.7 s of the controller's one strategy thread
# per 60-result host on ansible-core 2.19; a string is one value.
TASK_RESULT_KEY = "clustereval_results_json"

REQUIRED_FIELDS = ("run_id", "check", "phase", "domain", "subject", "status", "severity", "summary")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def problems(result: dict[str, Any]) -> list[str]:
    """What is wrong with a check result dict (empty when it honours the contract)."""
    out = [f"missing field {name!r}" for name in REQUIRED_FIELDS if result.get(name) in (None, "")]
    if result.get("status") not in STATUSES:
        out.append(f"status {result.get('status')!r} is not one of {', '.join(STATUSES)}")
    if result.get("severity") not in SEVERITIES:
        out.append(f"severity {result.get('severity')!r} is not one of {', '.join(SEVERITIES)}")
    if result.get("phase") not in PHASES:
        out.append(f"phase {result.get('phase')!r} is not one of {', '.join(PHASES)}")
    if result.get("status") == "skip" and not result.get("summary"):
        out.append("a skip must say why in its summary")
    if not isinstance(result.get("artifacts", []), list):
        out.append("artifacts must be a list of paths relative to the run directory")
    if not isinstance(result.get("evidence", {}), dict):
        out.append("evidence must be a mapping")
    if not isinstance(result.get("params", {}), dict):
        out.append("params must be a mapping")
    series = result.get("series", [])
    if not isinstance(series, list) or not all(isinstance(s, dict) and s.get("path") for s in series):
        out.append("series must be a list of {path, kind, ...} mappings")
    measured = result.get("measured")
    if measured is not None and (not isinstance(measured, dict)
                                 or not isinstance(measured.get("events", []), list)):
        out.append("measured must be a mapping with an events list")
    return out


def params_key(params: Any) -> str:
    """A canonical text of a result's params (sorted JSON; '' for none), part of its identity."""
    if not params:
        return ""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)


def identity(result: dict[str, Any]) -> tuple[str, str, str]:
    """(check, subject, params) — what a re-run of the same variant supersedes."""
    return (str(result.get("check")), str(result.get("subject")), params_key(result.get("params")))


def params_label(params: Any) -> str:
    """The variant in a few words for reports: ``collective=all_reduce, nodes=2`` ('' for none)."""
    if not isinstance(params, dict) or not params:
        return ""
    parts = []
    for key, value in sorted(params.items()):
        if isinstance(value, list | tuple):
            value = ",".join(map(str, value))
        parts.append(f"{key}={value}")
    return ", ".join(parts)


PAIR_SEPARATOR = "->"
SET_SEPARATOR = "+"


def pair_subject(source: str, destination: str) -> str:
    """The subject of a measurement from ``source`` to ``destination`` (ordered)."""
    return f"{source}{PAIR_SEPARATOR}{destination}"


def set_subject(hosts: Iterable[str]) -> str:
    """The subject of a measurement over a set of hosts (order does not matter)."""
    return SET_SEPARATOR.join(sorted(set(hosts)))


def component_subject(host: str, component: str) -> str:
    """The subject of one component of a host: ``node3/gpu5``."""
    return f"{host}/{component}"


def subject_hosts(subject: Any) -> list[str]:
    """The hosts a subject names, in order: a host, a host's component, a pair or a set; none for
    ``_cluster`` and for named subjects such as ``tier:home``."""
    return list(hosts_of_subject(str(subject or "")))


def hosts_of_subject(text: str) -> tuple[str, ...]:
    """:func:`subject_hosts` of a subject's text as a tuple, remembered (see :func:`hosts_of_subjects`)."""
    found = _HOSTS.get(text)
    if found is None:
        if len(_HOSTS) >= _HOSTS_MAX:
            _HOSTS.clear()
        found = _HOSTS[text] = _parse_hosts(text)
    return found


def hosts_of_subjects(subjects: set[str]) -> set[str]:
    """The hosts a set of subject texts names. A fleet's reports ask it of the same subjects (``node0042/gpu3``)
    for every check: the subjects not seen before are parsed, the rest looked up, each step one C-level set or
    map operation."""
    for text in subjects - _HOSTS.keys():
        hosts_of_subject(text)
    try:
        return set().union(*map(_HOSTS.__getitem__, subjects))
    except KeyError:  # the memo was cleared while filling it: more subjects than it holds
        return set().union(*map(hosts_of_subject, subjects))


# subject text -> its hosts. A 10,000-node fleet has ~90,000 subjects (hosts and GPUs); cleared when full.
_HOSTS: dict[str, tuple[str, ...]] = {}
_HOSTS_MAX = 1 << 18


def _parse_hosts(text: str) -> tuple[str, ...]:
    if not text or text == CLUSTER_SUBJECT or ":" in text.split("/", 1)[0]:
        return ()
    if PAIR_SEPARATOR in text:
        parts = text.split(PAIR_SEPARATOR)
    elif SET_SEPARATOR in text:
        parts = text.split(SET_SEPARATOR)
    else:
        parts = [text]
    # A pair or set of components (``n1/gpu0->n2/gpu3``) names the components' hosts, each once.
    return tuple(dict.fromkeys(part.split("/", 1)[0] for part in parts if part))


def to_task_result(results: list[dict[str, Any]]) -> str:
    """The value of :data:`TASK_RESULT_KEY` for ``results``."""
    return json.dumps(results, sort_keys=True, default=str)


def from_task_result(task_result: dict[str, Any]) -> list[dict[str, Any]]:
    """The results a task returned under :data:`TASK_RESULT_KEY` (none when it returned none).

    Raises ``ValueError`` when the value is not a JSON list of result objects.
    """
    text = task_result.get(TASK_RESULT_KEY)
    if not text:
        return []
    items = json.loads(text)
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ValueError(f"{TASK_RESULT_KEY} is not a JSON list of result objects")
    return items


def finite(value: Any) -> Any:
    """``value`` with every infinite or NaN float replaced by None, at any depth: JSON has no such numbers, and a
    tool that overflows (iperf3 printing 1e999) must not make a results line or a parse output unreadable."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """Strict JSON (no Infinity or NaN) of ``value``; non-JSON types as strings."""
    return json.dumps(finite(value), allow_nan=False, default=str, **options)


def append(run_dir: str | os.PathLike[str], results: Iterable[dict[str, Any]]) -> int:
    """Append results to ``results.jsonl``; flushed and fsynced before returning.

    Safe from several processes at once (Ansible's forked workers record their own results): the lines
    of one call are written in one ``write`` under an exclusive lock, so lines never interleave.
    """
    lines = [dumps(result, sort_keys=True) + "\n" for result in results]
    if not lines:
        return 0
    path = Path(run_dir) / RESULTS_FILE
    private.folder(path.parent)
    with private.open_file(path, "a", encoding="utf-8") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            fh.write("".join(lines))
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return len(lines)


RUN_INFO_FILE = "run.json"


def _run_info(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        info = json.loads((Path(run_dir) / RUN_INFO_FILE).read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def run_id_of(run_dir: str | os.PathLike[str]) -> str | None:
    """The run's own id, from ``run.json`` in the run directory (None when the file is missing, unreadable or
    names no run id)."""
    return _own_id(_run_info(run_dir))


def _own_id(info: dict[str, Any]) -> str | None:
    run_id = info.get("run_id")
    return run_id if isinstance(run_id, str) and run_id else None


def _earlier_ids(info: dict[str, Any]) -> set[str]:
    """The ids of earlier starts into the same run directory, which ``run.json`` lists as ``previous_run_ids``."""
    earlier = info.get("previous_run_ids")
    return {item for item in earlier if isinstance(item, str) and item} if isinstance(earlier, list) else set()


def _catalogue_ids() -> frozenset[str] | None:
    """The check ids of the packaged catalogue; None when it cannot be read (the scorer says so itself).
    Imported here, not at module level: ``clustereval.checks`` imports this module."""
    try:
        from clustereval.checks import catalogue

        return frozenset(catalogue.load())
    except Exception:
        return None


def _json_loads() -> Any:
    """The fastest JSON reader at hand: orjson when installed (three to four times faster on result lines), else
    the standard library's. Both refuse the same torn lines; orjson also refuses NaN and integers beyond 64 bits,
    which :func:`dumps` never writes, so such a line is read again by the standard library before it is judged."""
    try:
        import orjson
    except ImportError:
        return json.loads

    def loads(line: str) -> Any:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            return json.loads(line)

    return loads


def _valid(obj: dict[str, Any]) -> bool:
    """The common case of :func:`problems` (a well-formed result) answered without building its message list.
    Called once per line of a fleet's two million: the required fields are fetched in one C call."""
    try:
        required = _REQUIRED(obj)
    except KeyError:
        return False
    get = obj.get
    return (None not in required and "" not in required
            and get("status") in _STATUS_SET and get("severity") in _SEVERITY_SET and get("phase") in _PHASE_SET
            and isinstance(get("artifacts", ()), list) and isinstance(get("evidence", _EMPTY), dict)
            and isinstance(get("params", _EMPTY), dict) and "series" not in obj and "measured" not in obj)


_STATUS_SET, _SEVERITY_SET, _PHASE_SET = frozenset(STATUSES), frozenset(SEVERITIES), frozenset(PHASES)
_EMPTY: dict[str, Any] = {}
_REQUIRED = operator.itemgetter(*REQUIRED_FIELDS)


def load(
    run_dir: str | os.PathLike[str],
    keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Read ``results.jsonl``; returns (results, warnings). Left out, each with a warning, never fatal: a torn line
    (a crash mid-write), a line that breaks the result contract (:func:`problems`: a missing field, an unknown
    status), a line whose check id is not in the check catalogue, and a line whose ``run_id`` is not the run's own
    (``run.json``'s ``run_id``, or one of its ``previous_run_ids``: earlier starts into the same directory; this rule
    is skipped when run.json names no run id). Such a line can neither add a verdict nor replace a real one, nor cap
    the tier. ``keep``, when given, is applied to every result that is kept (the reports use it to hold a fleet's
    passing results in fewer fields) before the next line is read, so the whole file is never in memory at once."""
    path = Path(run_dir) / RESULTS_FILE
    if not path.exists():
        return [], [f"{path} does not exist"]
    if not path.is_file():
        return [], [f"{path} is not a file (a {'directory' if path.is_dir() else 'special file'}): no results read"]
    known = _catalogue_ids()
    info = _run_info(run_dir)
    own_run = _own_id(info)
    own_runs = {own_run, *_earlier_ids(info)} if own_run is not None else None
    results: list[dict[str, Any]] = []
    warnings: list[str] = []
    loads = _json_loads()
    with collector_paused():
        _read_lines(path, loads, known, own_run, own_runs, keep, results, warnings)
    return results, warnings


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block (and resume it after, if it ran before).

    Each of its full passes walks every container alive: over a fleet's two million results, reading and
    reporting spend more time in the collector than in their own work. Results hold no reference cycles, so
    reference counting frees them all the same; anything cyclic made meanwhile is collected after the block.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _read_lines(path: Path, loads: Callable[[str], Any], known: frozenset[str] | None, own_run: str | None,
                own_runs: set[str | None] | None, keep: Callable[[dict[str, Any]], dict[str, Any]] | None,
                results: list[dict[str, Any]], warnings: list[str]) -> None:
    """:func:`load`'s loop over the lines of ``path``: appends to ``results`` and ``warnings``."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = loads(line)
            except json.JSONDecodeError as exc:
                warnings.append(f"{path.name}:{lineno}: unreadable line skipped ({exc.msg})")
                continue
            if not isinstance(obj, dict):
                warnings.append(f"{path.name}:{lineno}: not a JSON object, skipped")
                continue
            broken = [] if _valid(obj) else problems(obj)
            if broken:
                warnings.append(f"{path.name}:{lineno}: breaks the result contract ({'; '.join(broken[:3])}), "
                                "skipped")
                continue
            if known is not None and (not isinstance(obj["check"], str) or obj["check"] not in known):
                warnings.append(f"{path.name}:{lineno}: check id {obj['check']!r} is not in the catalogue, skipped")
                continue
            if own_runs is not None and (not isinstance(obj["run_id"], str) or obj["run_id"] not in own_runs):
                warnings.append(f"{path.name}:{lineno}: from another run {obj['run_id']!r} (this run is "
                                f"{own_run!r}), skipped")
                continue
            results.append(keep(obj) if keep is not None else obj)


def latest(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the last result per (check, subject, params): a re-run variant supersedes its earlier line,
    other variants of the same check and subject stay."""
    keyed: dict[tuple[str, str, str], dict[str, Any]] = {}
    # results loaded for a report share their params dicts; each is keyed once. The dict is held beside its key,
    # so its id cannot be reused by another one during this call.
    keys: dict[int, tuple[Any, str]] = {}
    for result in results:
        params = result.get("params")
        known = keys.get(id(params))
        if known is None:
            known = keys[id(params)] = (params, params_key(params))
        keyed[(str(result.get("check")), str(result.get("subject")), known[1])] = result
    return list(keyed.values())
