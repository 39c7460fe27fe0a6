"""Service-level definitions (data: ``sla.yml``, or the contract's own file) and the availability they define.

:func:`load_sla` reads and checks a definitions file (a missing key or a wrong value is one :class:`SlaError`
sentence naming it). :func:`availability` is a pure function of the runs' observations: each run is a sample at
its start time that holds until the next one; per node, rack (down when at least N of its nodes are down) and
cluster (down when fewer than X % of its nodes are up) the time up, down, unobserved and in planned maintenance,
and the incidents (contiguous down time, with the evidence that said so).
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from clustereval import yamldata
from clustereval.history.store import HistoryError

KINDS = ("acceptance", "monthly")
UP, DOWN, UNKNOWN, EXCLUDED = "up", "down", "unobserved", "maintenance"
EVIDENCE_KEPT = 5


class SlaError(HistoryError, ValueError):
    """An SLA definitions file that cannot be used; the message is one sentence naming the file and the key."""


@dataclass(frozen=True)
class Maintenance:
    start: datetime
    end: datetime
    hosts: frozenset[str] | None  # None: the whole cluster
    reason: str


@dataclass(frozen=True)
class Sla:
    source: str
    origin: str  # the file it was read from
    node_target: float  # fractions (0.995), not percent
    node_scope: str
    down_checks: dict[str, tuple[str, ...]]
    every_result_error: bool
    rack_target: float
    rack_scope: str
    rack_size: int
    rack_down_at: int
    racks: dict[str, tuple[str, ...]]
    host_pattern: re.Pattern[str] | None
    rack_fact: str | None
    cluster_target: float
    cluster_up_below: float
    min_samples: int
    min_coverage: float
    hold_max_s: float | None
    drill_targets: dict[str, Any]
    noise: float
    required: dict[str, tuple[str, ...]] = field(default_factory=dict)  # term -> kinds it is required in
    maintenance: tuple[Maintenance, ...] = ()


def default_text() -> str:
    return resources.files("clustereval.history").joinpath("sla.yml").read_text(encoding="utf-8")


class _Reader:
    def __init__(self, data: dict[str, Any], origin: str) -> None:
        self.data, self.origin = data, origin

    def fail(self, key: str, why: str) -> SlaError:
        return SlaError(f"SLA file {self.origin}: {key} {why}")

    def get(self, key: str, optional: bool = False, default: Any = None) -> Any:
        node: Any = self.data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                if optional:
                    return default
                raise self.fail(key, "is missing")
            node = node[part]
        return node

    def number(self, key: str, low: float, high: float | None = None, optional: bool = False) -> float | None:
        value = self.get(key, optional)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value < low or (high is not None
                                                                                            and value > high):
            span = f"between {low:g} and {high:g}" if high is not None else f"a number of at least {low:g}"
            raise self.fail(key, f"must be {span}, not {value!r}")
        return float(value)

    def choice(self, key: str, choices: tuple[str, ...]) -> str:
        value = self.get(key)
        if value not in choices:
            raise self.fail(key, f"must be one of {', '.join(choices)}, not {value!r}")
        return str(value)

    def kinds(self, key: str) -> tuple[str, ...]:
        value = self.get(key)
        if not isinstance(value, list) or any(v not in KINDS for v in value):
            raise self.fail(key, f"must be a list of review kinds ({', '.join(KINDS)}), not {value!r}")
        return tuple(value)


def parse_time(value: Any) -> datetime:
    """A time as the CLI, the SLA file and run.json give it (ISO-8601; a date alone is its midnight; no zone is
    UTC), timezone-aware. Raises :class:`HistoryError` when it is none."""
    if isinstance(value, datetime):
        found = value
    elif isinstance(value, date):
        found = datetime(value.year, value.month, value.day)
    else:
        text = str(value or "").strip()
        try:
            found = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise HistoryError(f"{value!r} is no ISO-8601 date or time (2026-01-31 or 2026-01-31T12:00:00Z)"
                               ) from None
    return found.replace(tzinfo=UTC) if found.tzinfo is None else found.astimezone(UTC)


def _time(reader: _Reader, key: str, value: Any) -> datetime:
    try:
        return parse_time(value)
    except HistoryError:
        raise reader.fail(key, f"must be an ISO-8601 time, not {value!r}") from None


def _maintenance(reader: _Reader) -> tuple[Maintenance, ...]:
    entries = reader.get("maintenance", optional=True, default=[]) or []
    if not isinstance(entries, list):
        raise reader.fail("maintenance", "must be a list of {start, end, hosts, reason}")
    out = []
    for i, entry in enumerate(entries):
        key = f"maintenance[{i}]"
        if not isinstance(entry, dict) or "start" not in entry or "end" not in entry:
            raise reader.fail(key, "must give start and end")
        start, end = _time(reader, f"{key}.start", entry["start"]), _time(reader, f"{key}.end", entry["end"])
        if end <= start:
            raise reader.fail(key, "ends before it starts")
        hosts = entry.get("hosts")
        if hosts is not None and (not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts)):
            raise reader.fail(f"{key}.hosts", "must be a list of host names")
        out.append(Maintenance(start, end, frozenset(hosts) if hosts else None, str(entry.get("reason") or "")))
    return tuple(out)


def load_sla(path: str | Path | None = None) -> Sla:
    """The SLA definitions of ``path`` (the packaged ``sla.yml`` when None). Raises :class:`SlaError`."""
    origin = str(path) if path else "clustereval/history/sla.yml (default)"
    try:
        text = Path(path).read_text(encoding="utf-8") if path else default_text()
        data = yamldata.load(text)
    except OSError as exc:
        raise SlaError(f"SLA file {origin} cannot be read: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SlaError(f"SLA file {origin} is not YAML ({first})") from None
    if not isinstance(data, dict):
        raise SlaError(f"SLA file {origin} holds no mapping of definitions (node, rack, cluster, samples, drills)")
    r = _Reader(data, origin)
    source = r.get("source")
    if not isinstance(source, str) or not source.strip():
        raise r.fail("source", "must say where the definitions come from (the contract, its clause)")
    checks = r.get("node.down_when.checks")
    if not isinstance(checks, dict) or not checks or not all(
            isinstance(v, list) and v and all(s in ("fail", "warn", "error") for s in v) for v in checks.values()):
        raise r.fail("node.down_when.checks", "must map check ids to the statuses that mean down (fail, warn, error)")
    from clustereval.checks import catalogue

    known = catalogue.load()
    for check in checks:
        if check not in known:
            raise r.fail("node.down_when.checks", f"names {check!r}, which is no check clustereval reports")
    racks = r.get("rack.racks", optional=True, default={}) or {}
    if not isinstance(racks, dict) or not all(isinstance(v, list) and v for v in racks.values()):
        raise r.fail("rack.racks", "must map rack names to lists of hosts")
    pattern = r.get("rack.host_pattern", optional=True)
    try:
        compiled = re.compile(pattern) if pattern else None
    except (re.error, TypeError) as exc:
        raise r.fail("rack.host_pattern", f"is no regular expression ({exc})") from None
    if compiled is not None and compiled.groups < 1:
        raise r.fail("rack.host_pattern", "needs a group that names the rack, e.g. '^(gb-r\\d+)-n\\d+$'")
    targets = r.get("drills.targets")
    if not isinstance(targets, dict):
        raise r.fail("drills.targets", "must map drill check ids to 'baselines' or {warn: S, fail: S}")
    for check, target in targets.items():
        if check not in known:
            raise r.fail("drills.targets", f"names {check!r}, which is no check clustereval reports")
        if target == "baselines":
            continue
        if not isinstance(target, dict) or "fail" not in target or not all(
                v is None or (isinstance(v, int | float) and not isinstance(v, bool) and v >= 0)
                for v in target.values()):
            raise r.fail(f"drills.targets.{check}", "must be 'baselines' or {warn: seconds, fail: seconds}")
    every = r.get("node.down_when.every_result_error")
    if not isinstance(every, bool):
        raise r.fail("node.down_when.every_result_error", f"must be true or false, not {every!r}")
    hold = r.number("samples.hold_max_h", 0.0, optional=True)
    fact = r.get("rack.from_fact", optional=True)
    return Sla(
        source=" ".join(source.split()), origin=origin,
        node_target=r.number("node.availability_target", 0.0, 100.0) / 100, node_scope=r.choice(
            "node.scope", ("fleet", "each")),
        down_checks={str(k): tuple(v) for k, v in checks.items()}, every_result_error=every,
        rack_target=r.number("rack.availability_target", 0.0, 100.0) / 100, rack_scope=r.choice(
            "rack.scope", ("fleet", "each")),
        rack_size=int(r.number("rack.size", 1)), rack_down_at=int(r.number("rack.down_when_nodes_down_at_least", 1)),
        racks={str(k): tuple(str(h) for h in v) for k, v in racks.items()}, host_pattern=compiled,
        rack_fact=str(fact) if fact else None,
        cluster_target=r.number("cluster.availability_target", 0.0, 100.0) / 100,
        cluster_up_below=r.number("cluster.down_when_nodes_up_below", 0.0, 100.0) / 100,
        min_samples=int(r.number("samples.min_samples", 1)), min_coverage=r.number("samples.min_coverage", 0.0,
                                                                                     100.0) / 100,
        hold_max_s=hold * 3600 if hold is not None else None, drill_targets=dict(targets),
        noise=r.number("changes.noise", 0.0) / 100,
        required={"node": r.kinds("node.required_in"), "rack": r.kinds("rack.required_in"),
                  "cluster": r.kinds("cluster.required_in"), "drills": r.kinds("drills.required_in")},
        maintenance=_maintenance(r))


# ------------------------------------------------------------------------------------------ availability


@dataclass
class Sample:
    """One run: what it said of each node it saw (``{host: (state, evidence)}``, state up or down)."""
    run_id: str
    at: datetime
    nodes: dict[str, tuple[str, list[dict[str, Any]]]]
    in_window: bool = True


class _Tracker:
    """Time per state and the incidents (down, through unobserved stretches, until seen up) of one subject."""

    def __init__(self, level: str, subject: str) -> None:
        self.level, self.subject = level, subject
        self.seconds = dict.fromkeys((UP, DOWN, UNKNOWN, EXCLUDED), 0.0)
        self.samples = 0
        self.open: dict[str, Any] | None = None
        self.seen: set[str] = set()
        self.incidents: list[dict[str, Any]] = []

    def step(self, state: str, start: datetime, end: datetime, evidence: list[dict[str, Any]],
             carried: bool) -> None:
        span = (end - start).total_seconds()
        self.seconds[state] += span
        if state == DOWN:
            if self.open is None:
                self.open = {"level": self.level, "subject": self.subject, "start": start, "end": None,
                             "down_s": 0.0, "unobserved_s": 0.0, "began_before_window": carried,
                             "evidence": [], "evidence_total": 0}
            self.open["down_s"] += span
            for item in evidence:
                key = json.dumps(item, sort_keys=True, default=str)
                if key not in self.seen:
                    self.seen.add(key)
                    self.open["evidence_total"] += 1
                    if len(self.open["evidence"]) < EVIDENCE_KEPT:
                        self.open["evidence"].append(item)
        elif state == UP and self.open is not None:
            self.open["end"] = start
            self._close(start)
        elif self.open is not None:
            self.open["unobserved_s"] += span

    def _close(self, end: datetime) -> None:
        assert self.open is not None
        self.open["duration_s"] = (end - self.open["start"]).total_seconds()
        self.open["ongoing"] = self.open["end"] is None
        self.incidents.append(self.open)
        self.open = None
        self.seen = set()

    def finish(self, until: datetime) -> dict[str, Any]:
        if self.open is not None:
            self._close(until)
        observed = self.seconds[UP] + self.seconds[DOWN]
        planned = sum(self.seconds.values()) - self.seconds[EXCLUDED]
        return {**{f"{k}_s": v for k, v in self.seconds.items()}, "samples": self.samples,
                "availability": self.seconds[UP] / observed if observed else None,
                "coverage": observed / planned if planned else None, "incidents": len(self.incidents)}


def _segments(samples: list[Sample], since: datetime, until: datetime, sla: Sla
              ) -> list[tuple[datetime, datetime, Sample | None]]:
    """The window cut where anything changes, each piece with the sample standing for it (None: none does)."""
    cuts = {since, until}
    for sample in samples:
        cuts.add(sample.at)
        if sla.hold_max_s is not None:
            cuts.add(sample.at + timedelta(seconds=sla.hold_max_s))
    for m in sla.maintenance:
        cuts |= {m.start, m.end}
    points = sorted(c for c in cuts if since <= c <= until)
    ordered = sorted(samples, key=lambda s: s.at)
    out, i, current = [], 0, None
    for start, end in itertools.pairwise(points):
        while i < len(ordered) and ordered[i].at <= start:
            current = ordered[i]
            i += 1
        standing = current
        if standing is not None and sla.hold_max_s is not None and (start - standing.at).total_seconds() >= \
                sla.hold_max_s:
            standing = None
        out.append((start, end, standing))
    return out


def availability(samples: list[Sample], hosts: list[str], racks: dict[str, list[str]], since: datetime,
                 until: datetime, sla: Sla) -> dict[str, Any]:
    """Per node, rack and the cluster: seconds up / down / unobserved / in maintenance, availability (up share of
    the observed time), coverage (observed share of the time not in maintenance), samples, and the incidents."""
    nodes = {h: _Tracker("node", h) for h in hosts}
    rack_t = {r: _Tracker("rack", r) for r in racks}
    cluster = _Tracker("cluster", "_cluster")
    for sample in samples:
        if sample.in_window and since <= sample.at < until:
            cluster.samples += 1
            for host in sample.nodes:
                if host in nodes:
                    nodes[host].samples += 1
    for rack, members in racks.items():
        rack_t[rack].samples = min((nodes[h].samples for h in members if h in nodes), default=0)
    for start, end, sample in _segments(samples, since, until, sla):
        carried = sample is not None and sample.at < since
        active = [m for m in sla.maintenance if m.start <= start and end <= m.end]
        states: dict[str, str] = {}
        for host, tracker in nodes.items():
            if any(m.hosts is None or host in m.hosts for m in active):
                state, evidence = EXCLUDED, []
            elif sample is None or host not in sample.nodes:
                state, evidence = UNKNOWN, []
            else:
                state, evidence = sample.nodes[host]
            states[host] = state
            tracker.step(state, start, end, evidence, carried)
        for rack, members in racks.items():
            counted = [states.get(h, UNKNOWN) for h in members]
            down, unknown, planned = counted.count(DOWN), counted.count(UNKNOWN), counted.count(EXCLUDED)
            need = min(sla.rack_down_at, len(members))  # a rack smaller than the rule: down when all of it is
            if down >= need:
                state = DOWN
            elif down + planned >= need:
                state = EXCLUDED  # down only because of planned maintenance
            elif down + unknown + planned >= need:
                state = UNKNOWN
            else:
                state = UP
            down_hosts = sorted(h for h in members if states.get(h) == DOWN)
            evidence = [{"nodes_down": down_hosts, "of": len(members)}] if state == DOWN else []
            rack_t[rack].step(state, start, end, evidence, carried)
        live = [s for s in states.values() if s != EXCLUDED]
        up, unknown = live.count(UP), live.count(UNKNOWN)
        bar = sla.cluster_up_below * len(live)
        if not live:
            state = EXCLUDED
        elif up + unknown < bar:
            state = DOWN
        elif up < bar:
            state = UNKNOWN
        else:
            state = UP
        evidence = [{"nodes_up": up, "of": len(live), "run_id": sample.run_id if sample else None}] \
            if state == DOWN else []
        cluster.step(state, start, end, evidence, carried)
    out: dict[str, Any] = {"nodes": {h: t.finish(until) for h, t in nodes.items()},
                           "racks": {r: {**t.finish(until), "members": sorted(racks[r])} for r, t in rack_t.items()},
                           "cluster": cluster.finish(until)}
    out["incidents"] = {level: sorted((i for t in trackers for i in t.incidents), key=lambda i: (i["start"],
                                                                                                   i["subject"]))
                        for level, trackers in (("node", nodes.values()), ("rack", rack_t.values()),
                                                ("cluster", [cluster]))}
    return out
