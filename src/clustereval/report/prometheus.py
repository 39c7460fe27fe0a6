"""A run as Prometheus metrics: text exposition format 0.0.4 for node_exporter's textfile collector or a Pushgateway.

:func:`render` turns the view :func:`clustereval.report.build_view` reads into metric text, :func:`write_textfile`
puts it where the textfile collector reads it (atomically), :func:`push` sends it to a Pushgateway. Every series
carries a ``cluster`` label so one Prometheus (and the dashboard in ``extras/grafana/``) can hold many clusters.
See ``docs/prometheus.md`` for the families and the series budget.
"""

from __future__ import annotations

import base64
import math
import os
import re
import statistics
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clustereval import results as results_mod
from clustereval.report import clean_text, moment_of

PREFIX = "clustereval_"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TEXTFILE_NAME = "clustereval.prom"
# Per-host values are emitted only for results that are not a pass, worst first, at most this many. Prometheus keeps
# about 4 KiB of head memory per active series and stores ~1.3 bytes per sample: 1,000 series scraped every 60 s
# cost ~4 MiB of memory and ~2 MiB of disk a day; the uncapped 2,000,000 of 10,000 nodes x 200 checks would cost
# ~8 GiB of memory, and node_exporter would re-read a ~200 MiB file at every scrape.
DEFAULT_MAX_HOST_SERIES = 1000
NOT_PASSING = ("warn", "error", "fail")
STATS = ("min", "median", "max")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
CLUSTER_OPTION = "clustereval_cluster_name"


class ExportError(RuntimeError):
    """A textfile or Pushgateway export that could not be done; the message is one line naming what and where."""


class _Family:
    """One metric family: its help, and its samples keyed by label set (a repeated label set keeps the first)."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name = PREFIX + name
        self.help = help_text
        self.samples: dict[tuple[tuple[str, str], ...], float] = {}

    def add(self, value: float | None, **labels: Any) -> None:
        if value is None or isinstance(value, bool) or not math.isfinite(value):
            return
        key = tuple((name, clean_text(text)) for name, text in labels.items())
        self.samples.setdefault(key, value)

    def text(self) -> str:
        lines = [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} gauge"]
        for labels, value in self.samples.items():
            inner = ",".join(f'{name}="{_escape_label(text)}"' for name, text in labels)
            lines.append(f"{self.name}{{{inner}}} {_number(value)}")
        return "\n".join(lines) + "\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


def _numeric(value: Any) -> float | None:
    """A finite number (bools and text are no measurement here), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


def _epoch(stamp: Any) -> float | None:
    """Seconds since the epoch of an ISO-8601 time from run.json; None when absent or unreadable."""
    moment = moment_of(stamp)
    return moment.timestamp() if moment is not None and moment.tzinfo else None


def cluster_of(view: dict[str, Any]) -> str:
    """The cluster's name: the ``clustereval_cluster_name`` inventory variable the run recorded, else the stem of its
    first inventory source (``provider.ini`` -> ``provider``), else ``unknown``."""
    run = view.get("run") or {}
    options = run.get("options") if isinstance(run.get("options"), dict) else {}
    if options.get(CLUSTER_OPTION):
        return str(options[CLUSTER_OPTION])
    inventory = run.get("inventory") if isinstance(run.get("inventory"), dict) else {}
    sources = inventory.get("inventory_sources") or []
    return Path(str(sources[0])).stem if sources else "unknown"


def render(view: dict[str, Any], cluster: str | None = None, max_host_series: int = DEFAULT_MAX_HOST_SERIES) -> str:
    """The run in ``view`` as Prometheus text (format 0.0.4, no timestamps: the textfile collector refuses them).

    ``cluster`` overrides :func:`cluster_of`; ``max_host_series`` bounds the per-host values (see
    :data:`DEFAULT_MAX_HOST_SERIES`), the rest are counted in ``clustereval_result_value_dropped``.
    """
    score, run = view.get("score") or {}, view.get("run") or {}
    results = list(view.get("results") or [])
    base = {"cluster": cluster if cluster is not None else cluster_of(view)}
    families = [
        *_run_families(score, run, base),
        *_category_families(score, base),
        *_check_families(results, base),
        *_value_families(results, base, max_host_series),
    ]
    return "".join(family.text() for family in families if family.samples)


def _run_families(score: dict[str, Any], run: dict[str, Any], base: dict[str, str]) -> list[_Family]:
    info = _Family("run_info", "The run: its id, tier, whether the tier is provisional and the rubric (always 1).")
    info.add(1, **base, run_id=run.get("run_id") or "unknown", tier=score.get("tier") or "unknown",
             provisional="true" if score.get("provisional") else "false",
             rubric=(score.get("rubric") or {}).get("name") or "unknown")
    overall = _Family("score", "Weighted score of the run, 0-100 (absent when nothing could be measured).")
    overall.add(_numeric(score.get("score")), **base)
    coverage = _Family("coverage", "Share of the run's applicable results that have a verdict (pass, warn or fail).")
    coverage.add(_numeric(score.get("coverage")), **base)
    tiers = [t.get("name") for t in (score.get("rubric") or {}).get("tiers") or []]
    tier_rank = _Family("tier_rank", "Position of the tier in the rubric, 0 the best.")
    tier_rank.add(tiers.index(score["tier"]) if score.get("tier") in tiers else None, **base)
    counts = _Family("results", "Results of the run per status.")
    for status in results_mod.STATUSES:
        counts.add(int((score.get("counts") or {}).get(status) or 0), **base, status=status)
    started = _Family("run_start_timestamp_seconds", "When the run started, seconds since the epoch.")
    started.add(_epoch(run.get("started")), **base)
    ended = _Family("run_end_timestamp_seconds", "When the run ended, seconds since the epoch (absent until it ends).")
    ended.add(_epoch(run.get("ended")), **base)
    return [info, overall, coverage, tier_rank, counts, started, ended]


def _category_families(score: dict[str, Any], base: dict[str, str]) -> list[_Family]:
    scores = _Family("category_score", "Score of a rubric category, 0-100 (absent when the category was not measured).")
    coverage = _Family("category_coverage", "Share of a category's results that have a verdict (pass, warn or fail).")
    weight = _Family("category_weight", "Weight of a rubric category in the overall score.")
    for name, category in sorted((score.get("categories") or {}).items()):
        counts = category.get("counts") or {}
        total = sum(int(counts.get(s) or 0) for s in results_mod.STATUSES)
        verdicts = sum(int(counts.get(s) or 0) for s in ("pass", "warn", "fail"))
        scores.add(_numeric(category.get("score")), **base, category=name)
        coverage.add(verdicts / total if total else 0.0, **base, category=name)
        weight.add(_numeric(category.get("weight")), **base, category=name)
    return [scores, coverage, weight]


def _check_families(results: list[dict[str, Any]], base: dict[str, str]) -> list[_Family]:
    per_check: dict[str, list[str]] = {}
    for result in results:
        per_check.setdefault(str(result.get("check")), []).append(str(result.get("status")))
    counts = _Family("check_results", "Results of a check per status (over its subjects and variants).")
    worst = _Family("check_worst_status", "Worst status of a check: 0 pass, 1 skip, 2 warn, 3 error, 4 fail.")
    for check, statuses in sorted(per_check.items()):
        for status in results_mod.STATUSES:
            counts.add(statuses.count(status), **base, check=check, status=status)
        worst.add(results_mod.rank(results_mod.worst(statuses)), **base, check=check)
    return [counts, worst]


def _value_families(results: list[dict[str, Any]], base: dict[str, str], max_host_series: int) -> list[_Family]:
    measured = [r for r in results if _numeric(r.get("value")) is not None and r.get("unit")]
    groups: dict[tuple[str, str, str], list[float]] = {}
    labels: dict[int, tuple[Any, str]] = {}  # a fleet's results share their params dicts: each labelled once
    for result in measured:
        params = result.get("params")
        if id(params) not in labels:
            labels[id(params)] = (params, results_mod.params_label(params))
        key = (str(result["check"]), labels[id(params)][1], str(result["unit"]))
        groups.setdefault(key, []).append(result["value"])
    aggregate = _Family("check_value", "A check's measured values over its subjects: min, median and max.")
    subjects = _Family("check_value_subjects", "How many subjects a check's aggregated values come from.")
    for (check, variant, unit), values in sorted(groups.items()):
        for stat, value in zip(STATS, (min(values), statistics.median(values), max(values)), strict=True):
            aggregate.add(value, **base, check=check, variant=variant, unit=unit, stat=stat)
        subjects.add(len(values), **base, check=check, variant=variant, unit=unit)
    flagged = sorted((r for r in measured if r.get("status") in NOT_PASSING),
                     key=lambda r: (results_mod.worst_first(r["status"]), str(r["check"]), str(r.get("subject"))))
    per_host = _Family("result_value", "Measured value of a result that is not a pass (warn, error or fail).")
    for result in flagged[:max(0, max_host_series)]:
        per_host.add(result["value"], **base, check=result["check"], subject=result.get("subject"),
                     variant=results_mod.params_label(result.get("params")), unit=result["unit"])
    dropped = _Family("result_value_dropped", "Not-passing results whose value was left out by the series cap.")
    dropped.add(max(0, len(flagged) - max(0, max_host_series)), **base)
    return [aggregate, subjects, per_host, dropped]


def write_textfile(view: dict[str, Any], directory: str | os.PathLike[str], name: str = TEXTFILE_NAME,
                   **options: Any) -> Path:
    """Write :func:`render`'s text to ``directory/name`` for node_exporter's textfile collector and return the path.

    Written to a temporary file in the same directory (its name does not end in ``.prom``, so the collector never
    reads half a file) and renamed over the old one. Readable by all (0644): node_exporter runs as its own user.
    ``options`` go to :func:`render`. Raises :class:`ExportError` when the directory or name is unusable.
    """
    return write_text(render(view, **options), directory, name)


def write_text(text: str, directory: str | os.PathLike[str], name: str = TEXTFILE_NAME) -> Path:
    """:func:`write_textfile` of metric text already rendered (a run directory's ``metrics.prom``)."""
    folder = Path(directory)
    if not name.endswith(".prom") or "/" in name or name.startswith("."):
        raise ExportError(f"textfile name {name!r} must be a plain file name ending in .prom")
    if not folder.is_dir():
        raise ExportError(f"textfile directory {folder} does not exist or is not a directory")
    target = folder / name
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise ExportError(f"cannot write into textfile directory {folder}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), 0o644)
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ExportError(f"cannot write {target}: {exc.strerror}") from None
    return target


def push_url(url: str, job: str = "clustereval", grouping: Mapping[str, str] | None = None) -> str:
    """The Pushgateway URL of a group: ``<url>/metrics/job/<job>/<label>/<value>...``, each value URL-escaped, or
    ``<label>@base64/<value>`` where it holds a ``/`` (or is empty), which no escaping gets past the gateway."""
    segments = [_segment("job", job)]
    for label, value in (grouping or {}).items():
        if not _LABEL_NAME.fullmatch(label) or label.startswith("__") or label == "job":
            raise ExportError(f"grouping label {label!r} is not a usable Prometheus label name")
        segments.append(_segment(label, str(value)))
    return url.rstrip("/") + "/metrics/" + "/".join(segments)


def _segment(label: str, value: str) -> str:
    if "/" in value or not value:
        encoded = base64.urlsafe_b64encode(value.encode("utf-8")).decode("ascii") or "="
        return f"{label}@base64/{encoded}"
    return f"{label}/{urllib.parse.quote(value, safe='')}"


def _without_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without its ``user:password@`` part, and the Basic authorization header for it (None without)."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
        raise ExportError(f"Pushgateway URL must be http(s)://host[:port]: got {_redacted(url)!r}")
    if parts.username is None:
        return url, None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname  # an IPv6 literal keeps its brackets
    netloc = host if port is None else f"{host}:{port}"
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), f"Basic {token}"


def _redacted(url: str) -> str:
    return re.sub(r"(?<=://)[^/?#]*@", "***@", url)


def push(text: str, url: str, job: str = "clustereval", grouping: Mapping[str, str] | None = None,
         timeout_s: float = 10.0) -> str:
    """PUT ``text`` to the Pushgateway at ``url`` as the group ``job`` + ``grouping`` (replacing that group's metrics)
    and return the group's URL (without credentials). A ``user:password@`` in ``url`` becomes a Basic
    authorization header and appears in no message. Raises :class:`ExportError` on refusal, timeout or HTTP error."""
    plain, authorization = _without_credentials(url)
    target = push_url(plain, job, grouping)
    request = urllib.request.Request(target, data=text.encode("utf-8"), method="PUT",
                                     headers={"Content-Type": CONTENT_TYPE})
    if authorization:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        detail = " ".join(exc.read(300).decode("utf-8", "replace").split())
        raise ExportError(f"Pushgateway {target} refused the push: HTTP {exc.code} {exc.reason}"
                          + (f": {detail}" if detail else "")) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ExportError(f"cannot reach Pushgateway {target}: {reason}") from None
    return target

