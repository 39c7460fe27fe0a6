"""The security minimum-version table: loading it (packaged, file or URL) and comparing versions.

The table (``baselines/security_minimums.yml``, layout documented there) is data: per component the
lowest fixed release, per driver branch, runc rung, firmware train or release line, with the advisory
that set it. This module reads it and answers one question per component and observed version:
``pass``, ``fail``, ``grace`` (below a minimum whose bulletin is only days old) or ``unknown`` (the
version cannot be read or the table cannot place it). ``unknown`` is never a pass.

Version strings understood: NVIDIA drivers (``550.90.07``), nvcc (``V13.0.88``), Debian/RPM package
versions (``1:1.3.3-0ubuntu1~22.04.3``, ``5:29.7.0-1~ubuntu.24.04~noble``), release candidates in the
spellings upstreams use (``1.5.0-rc.3``, ``1.5.0-rc3``, ``1.17.0~rc.1``, ``1.2.0.rc1``), ConnectX
firmware (``28.39.1002``) and Ubuntu kernels (``6.8.0-124-generic``).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import urllib.request
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from clustereval import yamldata

PACKAGED = "baselines/security_minimums.yml"
FETCH_TIMEOUT_S = 10.0
MAX_TABLE_BYTES = 4 * 1024 * 1024
SENTINELS = {"", "none", "null", "n/a", "na", "[n/a]", "unknown", "not-found", "not found", "err!", "-"}
_PRE_RANK = {"alpha": 0, "a": 0, "beta": 1, "b": 1, "rc": 2}
_STABLE = (3, 0)


class TableError(Exception):
    """The table could not be read, fetched or understood."""


# ---------------------------------------------------------------------------------------- versions


@dataclass(frozen=True)
class Version:
    """A parsed version: numeric fields and a pre-release rank (an rc sorts below its stable release)."""

    parts: tuple[int, ...]
    pre: tuple[int, int] = _STABLE
    text: str = ""

    @property
    def is_prerelease(self) -> bool:
        return self.pre != _STABLE

    def key(self, width: int = 4) -> tuple[Any, ...]:
        return (*self.parts, *([0] * (width - len(self.parts))), self.pre)


def parse_version(text: Any) -> Version | None:
    """The first dotted number in ``text`` (epoch stripped) with its rc/beta/alpha suffix, else None.

    Distribution revisions after the upstream version (``-0ubuntu1~22.04.3``, ``-1``) are ignored, so
    a rebuild equals its upstream release (backported fixes are not credited: see the check summaries).
    """
    if text is None:
        return None
    raw = str(text).strip()
    if raw.lower() in SENTINELS:
        return None
    raw = re.sub(r"^\d+:(?=\d)", "", raw)
    match = re.search(r"(?<![\w.])[vV]?(\d+(?:\.\d+){0,3})", raw)
    if not match:
        return None
    parts = tuple(int(p) for p in match.group(1).split("."))
    rest = raw[match.end():]
    pre = _STABLE
    tag = re.match(r"[-~.+_]?(alpha|beta|rc|a|b)[.\-_]?(\d*)(?![A-Za-z])", rest, re.IGNORECASE)
    if tag:
        pre = (_PRE_RANK[tag.group(1).lower()], int(tag.group(2) or 0))
    return Version(parts, pre, match.group(1) + (rest[: tag.end()] if tag else ""))


def compare(a: Version, b: Version) -> int:
    """-1, 0 or 1 as ``a`` is older than, equal to or newer than ``b`` (missing fields count as 0)."""
    width = max(len(a.parts), len(b.parts))
    ka, kb = a.key(width), b.key(width)
    return (ka > kb) - (ka < kb)


def at_least(observed: Version, minimum: Version) -> bool:
    return compare(observed, minimum) >= 0


# ---------------------------------------------------------------------------------------- verdicts


@dataclass
class Assessment:
    """What the table says about one observed version of one component."""

    state: str  # pass | fail | grace | unknown
    observed: str | None
    minimum: str | None = None
    selector: str | None = None  # branch, rung, train or line the minimum belongs to
    advisory: str | None = None
    url: str | None = None
    reason: str = ""
    grace_until: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def evidence(self) -> dict[str, Any]:
        out = {"state": self.state, "observed": self.observed, "minimum": self.minimum,
               "selector": self.selector, "advisory": self.advisory, "url": self.url, "reason": self.reason}
        if self.grace_until:
            out["grace_until"] = self.grace_until
        out.update(self.extra)
        return {k: v for k, v in out.items() if v not in (None, "")}


def _date(value: Any) -> dt.date | None:
    """A full calendar date from the table (``2026-07-30`` or an ISO timestamp); month-only is None."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    match = re.match(r"(\d{4})-(\d{2})-(\d{2})", str(value or ""))
    return dt.date(*map(int, match.groups())) if match else None


@dataclass
class Table:
    """A loaded minimum table and where it came from."""

    data: dict[str, Any]
    origin: str

    @property
    def generated(self) -> dt.date | None:
        return _date(self.data.get("generated"))

    @property
    def grace_days(self) -> int:
        return int(self.data.get("grace_days") or 0)

    def component(self, name: str) -> dict[str, Any]:
        comp = (self.data.get("components") or {}).get(name)
        if not isinstance(comp, dict):
            raise TableError(f"the security table ({self.origin}) has no entry for {name!r}")
        return comp

    def age_days(self, today: dt.date) -> int | None:
        return None if self.generated is None else (today - self.generated).days

    # -- grading -------------------------------------------------------------------------------

    def _below(self, comp: dict[str, Any], entry: dict[str, Any], observed: str, minimum: str,
               selector: str | None, today: dt.date, reason: str) -> Assessment:
        """A fail, or a grace when the bulletin setting this minimum is younger than the grace period
        (or takes effect in the future)."""
        published = _date(entry.get("published") or comp.get("published"))
        effective = _date(entry.get("effective") or comp.get("effective"))
        start = max(d for d in (published, effective, dt.date.min) if d is not None)
        advisory = entry.get("advisory") or comp.get("advisory")
        url = entry.get("url") or comp.get("url")
        if start != dt.date.min:
            until = start + dt.timedelta(days=self.grace_days)
            if today <= until:
                return Assessment("grace", observed, minimum, selector, advisory, url,
                                  f"{reason}; the advisory is recent, so this is a grace period ending "
                                  f"{until.isoformat()}, not a pass", grace_until=until.isoformat())
        return Assessment("fail", observed, minimum, selector, advisory, url, reason)

    def assess(self, name: str, observed: Any, today: dt.date | None = None,
               line: str | None = None) -> Assessment:
        """Grade ``observed`` (a version string) for component ``name``."""
        today = today or dt.date.today()
        comp = self.component(name)
        kind = comp.get("kind", "minimum")
        text = None if observed is None else str(observed).strip()
        version = parse_version(text)
        if version is None:
            return Assessment("unknown", text, reason=f"the version {text!r} could not be read")
        grader = {"minimum": self._minimum, "branches": self._branches, "ladder": self._ladder,
                  "trains": self._trains, "release_lines": self._release_lines,
                  "release_window": self._minimum}.get(kind)
        if grader is None:
            raise TableError(f"the security table ({self.origin}) gives {name!r} an unknown kind {kind!r}")
        return grader(comp, text or "", version, today, line)

    def _minimum(self, comp, text, version, today, _line) -> Assessment:
        minimum = str(comp.get("minimum"))
        wanted = parse_version(minimum)
        if wanted is None:
            raise TableError(f"the security table ({self.origin}) has an unreadable minimum {minimum!r}")
        if at_least(version, wanted):
            return Assessment("pass", text, minimum, None, comp.get("advisory"), comp.get("url"),
                              f"{version.text} is at or above {minimum}")
        return self._below(comp, {}, text, minimum, None, today, f"{version.text} is below {minimum}")

    def _branches(self, comp, text, version, today, _line) -> Assessment:
        branches = {str(k): v for k, v in (comp.get("branches") or {}).items()}
        if not branches:
            raise TableError(f"the security table ({self.origin}) lists no driver branches")
        numbers = sorted(int(b) for b in branches)
        branch = version.parts[0]
        listed = ", ".join(f"R{b}" for b in numbers)
        if branch < numbers[0] - 200 or branch > 999 or len(version.parts) < 2:
            return Assessment("unknown", text, reason=f"{text!r} is not an NVIDIA Linux driver version "
                              f"(branches {listed})")
        if str(branch) in branches:
            entry = branches[str(branch)]
            if len(version.parts) != 3:
                # Linux releases of the listed branches have three fields; "595.84" is a Windows-style
                # version, whose numbering does not line up with the Linux minimum.
                return Assessment("unknown", text, str(entry["minimum"]), f"R{branch}", reason=(
                    f"{text!r} is not a Linux driver release of R{branch} (three fields expected; "
                    f"a Windows driver version cannot be compared with the Linux minimum)"))
            minimum = str(entry["minimum"])
            if at_least(version, parse_version(minimum)):
                return Assessment("pass", text, minimum, f"R{branch}", entry.get("advisory"), entry.get("url"),
                                  f"{version.text} is at or above R{branch}'s {minimum}")
            return self._below(comp, entry, text, minimum, f"R{branch}", today,
                               f"{version.text} is below R{branch}'s fixed release {minimum}")
        if branch > numbers[-1]:
            return Assessment("pass", text, None, f"R{branch}", reason=(
                f"R{branch} is newer than every branch of the table (newest R{numbers[-1]})"))
        if branch < numbers[0]:
            # Older than the oldest branch NVIDIA still fixes: end of life, below every minimum there is.
            oldest = branches[str(numbers[0])]
            return self._below(comp, oldest, text, str(oldest["minimum"]), f"R{branch}", today, (
                f"R{branch} is older than every supported branch of the table (oldest R{numbers[0]}, fixed in "
                f"{oldest['minimum']}): end of life, no security fixes"))
        return Assessment("unknown", text, None, f"R{branch}", reason=(
            f"branch R{branch} is not in the table ({listed}): NVIDIA's current bulletins list no fixed "
            f"release for it (an end-of-life branch gets no security fixes)"))

    def _ladder(self, comp, text, version, today, _line) -> Assessment:
        rungs = {str(k): v for k, v in (comp.get("rungs") or {}).items()}
        if not rungs:
            raise TableError(f"the security table ({self.origin}) lists no runc rungs")
        order = sorted(rungs, key=lambda r: tuple(int(p) for p in r.split(".")))
        mm = version.parts[:2] if len(version.parts) >= 2 else (version.parts[0], 0)
        key = f"{mm[0]}.{mm[1]}"
        newest = tuple(int(p) for p in order[-1].split("."))
        lowest = tuple(int(p) for p in order[0].split("."))
        if key in rungs:
            entry = rungs[key]
            minimum = str(entry["minimum"])
            if at_least(version, parse_version(minimum)):
                return Assessment("pass", text, minimum, key, entry.get("advisory"), entry.get("url"),
                                  f"{version.text} is at or above the {key} line's fix {minimum}")
            return self._below(comp, entry, text, minimum, key, today,
                               f"{version.text} is below the {key} line's fix {minimum}")
        if tuple(mm) > newest:
            return Assessment("pass", text, None, key, reason=f"the {key} line is newer than the ladder "
                              f"(newest {order[-1]})")
        if tuple(mm) < lowest:
            entry = rungs[order[-1]]
            return self._below(comp, entry, text, str(entry["minimum"]), key, today,
                               f"the {key} line is older than every maintained line; move to "
                               f"{entry['minimum']} or later")
        return Assessment("unknown", text, None, key, reason=f"the {key} line is not on the ladder "
                          f"({', '.join(order)})")

    def _trains(self, comp, text, version, today, _line) -> Assessment:
        trains = {str(k): v for k, v in (comp.get("trains") or {}).items()}
        if len(version.parts) < 3:
            return Assessment("unknown", text, reason=f"{text!r} is not <family>.<train>.<patch> firmware")
        family, train, patch = version.parts[:3]
        numbers = sorted(int(t) for t in trains)
        if str(train) in trains:
            entry = trains[str(train)]
            minimum = f"{family}.{train}.{entry['minimum']}"
            if patch >= int(entry["minimum"]):
                return Assessment("pass", text, minimum, f"train {train}", comp.get("advisory"),
                                  comp.get("url"), f"{text} is at or above {minimum}")
            return self._below(comp, entry, text, minimum, f"train {train}", today,
                               f"{text} is below {minimum} (train {train})")
        if numbers and train > numbers[-1]:
            return Assessment("pass", text, None, f"train {train}", reason=f"train {train} is newer than "
                              f"every train of the table (newest {numbers[-1]})")
        if numbers and train < numbers[0]:
            oldest = trains[str(numbers[0])]
            minimum = f"{family}.{numbers[0]}.{oldest['minimum']}"
            return self._below(comp, oldest, text, minimum, f"train {train}", today, (
                f"train {train} of {text} is older than every train of the table (oldest {numbers[0]}, fixed "
                f"in {minimum}): below the minimum"))
        return Assessment("unknown", text, None, f"train {train}", reason=(
            f"train {train} of {text} is not in the table ({', '.join(map(str, numbers))})"))

    def _release_lines(self, comp, text, version, today, line) -> Assessment:
        lines = {str(k): v for k, v in (comp.get("lines") or {}).items()}
        legacy = comp.get("legacy_affected_through")
        if version.parts[0] < 20 and legacy:
            if at_least(parse_version(legacy), version):
                return self._below(comp, {}, text, f"> {legacy}", "legacy 1.x", today,
                                   f"{version.text} is a legacy release, affected through {legacy}")
            return Assessment("unknown", text, None, "legacy 1.x", reason=(
                f"{version.text} is a legacy release after {legacy}, which the advisory names neither "
                f"affected nor fixed"))
        if line:
            if line not in lines:
                return Assessment("unknown", text, None, line, reason=f"release line {line!r} is not in the table")
            candidates = {line: lines[line]}
        else:
            candidates = {name: entry for name, entry in lines.items()
                          if parse_version(entry["minimum"]).parts[:2] == version.parts[:2]}
        if not candidates:
            newest = max(parse_version(e["minimum"]).key() for e in lines.values())
            if version.key() > newest:
                return Assessment("pass", text, None, None, reason=f"{version.text} is newer than every line")
            return Assessment("unknown", text, None, None, reason=f"{version.text} belongs to no release line "
                              f"of the table ({', '.join(lines)})")
        passed = {n for n, e in candidates.items() if at_least(version, parse_version(e["minimum"]))}
        minima = ", ".join(f"{n} {e['minimum']}" for n, e in candidates.items())
        if len(passed) == len(candidates):
            return Assessment("pass", text, minima, "/".join(candidates), comp.get("advisory"), comp.get("url"),
                              f"{version.text} is at or above {minima}")
        if not passed:
            first = next(iter(candidates.values()))
            return self._below(comp, first, text, minima, "/".join(candidates), today,
                               f"{version.text} is below {minima}")
        return Assessment("unknown", text, minima, "/".join(candidates), reason=(
            f"{version.text} is fixed on {', '.join(sorted(passed))} but not on "
            f"{', '.join(sorted(set(candidates) - passed))}; which line is installed decides"))

    def assess_distro_kernel(self, os_id: str, version_id: str, release: str,
                             today: dt.date | None = None) -> Assessment | None:
        """The distribution-kernel advisory for this OS and running kernel, or None if none applies."""
        today = today or dt.date.today()
        comp = self.component("kernel")
        for entry in comp.get("entries") or []:
            if str(entry.get("distro")) != os_id or str(entry.get("version_id")) != version_id:
                continue
            series = str(entry["series"])
            match = re.match(rf"{re.escape(series)}-(\d+)", release)
            if not release.startswith(series + "-"):
                continue
            minimum = f"{series}-{entry['minimum_abi']}"
            if not match:
                return Assessment("unknown", release, minimum, f"{os_id} {version_id}",
                                  entry.get("advisory"), entry.get("url"), f"no ABI number in {release!r}")
            if int(match.group(1)) >= int(entry["minimum_abi"]):
                return Assessment("pass", release, minimum, f"{os_id} {version_id}", entry.get("advisory"),
                                  entry.get("url"), f"ABI {match.group(1)} is at or above {entry['minimum_abi']}")
            return self._below(comp, entry, release, minimum, f"{os_id} {version_id}", today,
                               f"ABI {match.group(1)} is below the fixed {entry['minimum_abi']}")
        return None


# ---------------------------------------------------------------------------------------- loading


def validate(data: Any, origin: str) -> dict[str, Any]:
    """The table if it has the documented shape; raises TableError naming what is wrong."""
    if not isinstance(data, dict):
        raise TableError(f"{origin}: the security table must be a mapping")
    if _date(data.get("generated")) is None:
        raise TableError(f"{origin}: the security table has no `generated:` date")
    comps = data.get("components")
    if not isinstance(comps, dict) or not comps:
        raise TableError(f"{origin}: the security table has no `components:`")
    for name, comp in comps.items():
        if not isinstance(comp, dict) or "kind" not in comp:
            raise TableError(f"{origin}: component {name!r} has no `kind:`")
    return data


def _parse_text(text: str, origin: str) -> dict[str, Any]:
    try:
        # YAML is a superset of the JSON a web service would publish; libyaml's loader when present.
        data = yamldata.load(text)
    except yaml.YAMLError as exc:
        raise TableError(f"{origin}: not YAML or JSON: {exc}") from None
    return validate(data, origin)


def _fetch(url: str, timeout: float) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read(MAX_TABLE_BYTES + 1)
    except (OSError, ValueError) as exc:
        raise TableError(f"could not fetch the security table from {url}: {exc}") from None
    if len(body) > MAX_TABLE_BYTES:
        raise TableError(f"the security table at {url} is larger than {MAX_TABLE_BYTES} bytes")
    return body.decode("utf-8", errors="replace")


@functools.cache
def packaged() -> Table:
    """The table shipped with the package (read once per process)."""
    text = resources.files("clustereval").joinpath(PACKAGED).read_text(encoding="utf-8")
    return Table(_parse_text(text, PACKAGED), PACKAGED)


_CACHE: dict[str, Table] = {}


def load(source: str | None = None, timeout: float = FETCH_TIMEOUT_S) -> Table:
    """The table from ``source``: empty for the packaged one, an http(s)/file URL, or a file path.

    Fetched tables are cached per process (a judge call grades many checks against one table).
    """
    source = (source or "").strip()
    if not source:
        return packaged()
    if source in _CACHE:
        return _CACHE[source]
    if re.match(r"(https?|file)://", source, re.IGNORECASE):
        table = Table(_parse_text(_fetch(source, timeout), source), source)
    elif "://" in source:
        raise TableError(f"security table {source!r}: only http(s)://, file:// or a path are understood")
    else:
        path = Path(source).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TableError(f"could not read the security table {path}: {exc}") from None
        table = Table(_parse_text(text, str(path)), str(path))
    _CACHE[source] = table
    return table


def lowered_minimums(table: Table, reference: Table) -> list[str]:
    """Minimums ``table`` sets below ``reference`` (the packaged table), as readable lines.

    A table from a file or URL is not signed; one that lowers a packaged minimum is either older data
    or tampering, and must be said.
    """
    out: list[str] = []
    ref_comps = reference.data.get("components") or {}
    for name, ref in ref_comps.items():
        comp = (table.data.get("components") or {}).get(name)
        if not isinstance(comp, dict):
            out.append(f"{name}: missing")
            continue
        pairs: list[tuple[str, Any, Any]] = [(name, ref.get("minimum"), comp.get("minimum"))]
        for group in ("branches", "rungs", "trains", "lines"):
            for key, entry in (ref.get(group) or {}).items():
                mine = (comp.get(group) or {}).get(key) or (comp.get(group) or {}).get(int(key) if str(
                    key).isdigit() else key)
                pairs.append((f"{name} {key}", entry.get("minimum"), (mine or {}).get("minimum")))
        for label, ref_min, min_ in pairs:
            if ref_min is None:
                continue
            if min_ is None:
                out.append(f"{label}: missing (packaged {ref_min})")
                continue
            a, b = parse_version(min_), parse_version(ref_min)
            if a is None or b is None or compare(a, b) < 0:
                out.append(f"{label}: {min_} (packaged {ref_min})")
    return out


def to_json(table: Table) -> str:
    return json.dumps(table.data, default=str, sort_keys=True)
