"""The controller's side of a session: keep what each poll brings back, as it comes, and show it to checks.

Each poll of a session (``plugins/module_utils/session_runner.py`` on the node) returns the bytes its streams
wrote since the last poll. :class:`Recorder` appends them verbatim to ``raw/<subject>/<session>/<stream>.out``
(and ``.err``), parses every complete new line with the stream's parser (a header line, such as the CSV
header of ``nvidia-smi --query-gpu``, is remembered and put in front of every chunk) and appends the rows to
the stream's series, ``series/<subject>/<session>-<stream>.csv`` (CSV with a header row: one line of pandas
or DuckDB loads it; every row carries ``host`` and ``received_at``). Nothing waits for the end: an
interrupted session keeps every sample taken until then.

:class:`SessionView` is what a check judging a session sees (``Context.session``): the new chunk of the
current poll (for checks judged live) and, at the end, the whole series read back from the files.
"""

from __future__ import annotations

import base64
import csv
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustereval import parsers, private
from clustereval.results import now_iso
from clustereval.rundir import safe
from clustereval.series import SERIES_DIR, cell, typed


@dataclass
class Stream:
    """One stream of a session: a command whose output is kept, parsed and turned into a series."""

    name: str
    cmd: str
    parser: str | None = None
    header_lines: int = 0
    kind: str = "timeseries"
    x: str | None = "timestamp"
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Stream:
        return cls(name=str(spec["name"]), cmd=str(spec["cmd"]), parser=spec.get("parser"),
                   header_lines=int(spec.get("header_lines") or 0), kind=str(spec.get("kind") or "timeseries"),
                   x=spec.get("x", "timestamp"), params=dict(spec.get("params") or {}))


@dataclass
class _StreamState:
    carry: bytes = b""
    header: list[str] = field(default_factory=list)
    columns: list[str] | None = None
    rows: int = 0
    parse_errors: int = 0
    last_error: str | None = None
    bytes_out: int = 0
    bytes_err: int = 0


class Recorder:
    """Appends what polls return to the run directory and parses it into series, incrementally."""

    def __init__(self, run_dir: str, subject: str, session: str, streams: list[Stream]):
        self.run_dir = Path(run_dir)
        self.subject = subject
        self.session = session
        self.streams = {s.name: s for s in streams}
        self.state = {s.name: _StreamState() for s in streams}
        self.offsets: dict[str, int] = {}
        self.raw_dir = self.run_dir / "raw" / safe(subject) / safe(session)
        self.series_dir = self.run_dir / SERIES_DIR / safe(subject)
        private.folder(self.raw_dir)
        private.folder(self.series_dir)

    # ------------------------------------------------------------------ paths
    def raw_path(self, stream: str, suffix: str = "out") -> Path:
        return self.raw_dir / f"{safe(stream)}.{suffix}"

    def series_path(self, stream: str) -> Path:
        return self.series_dir / f"{safe(self.session)}-{safe(stream)}.csv"

    def relative(self, path: Path) -> str:
        return os.path.relpath(path, self.run_dir)

    # ------------------------------------------------------------------ feeding
    def feed(self, answer: dict[str, Any], final: bool = False) -> dict[str, dict[str, Any]]:
        """Keep one poll's answer; returns each stream's chunk parsed (``{}`` for a stream with nothing new
        or no parser). ``final`` also parses a last line that has no newline yet."""
        chunks: dict[str, dict[str, Any]] = {}
        received = now_iso()
        for name, entry in (answer.get("streams") or {}).items():
            if name not in self.streams:
                continue
            state = self.state[name]
            for suffix in ("out", "err"):
                part = entry.get(suffix) or {}
                data = base64.b64decode(part.get("data") or "")
                self.offsets[f"{name}.{suffix}"] = int(part.get("offset") or self.offsets.get(f"{name}.{suffix}", 0))
                if not data:
                    continue
                with private.open_file(self.raw_path(name, suffix), "ab") as fh:
                    fh.write(data)
                if suffix == "err":
                    state.bytes_err += len(data)
                    continue
                state.bytes_out += len(data)
                state.carry += data
            chunks[name] = self._parse_new(name, received, final)
        if final:
            for name in self.streams:
                if self.state[name].carry and name not in chunks:
                    chunks[name] = self._parse_new(name, received, True)
        return chunks

    def _parse_new(self, name: str, received: str, final: bool) -> dict[str, Any]:
        stream, state = self.streams[name], self.state[name]
        if final:
            complete, state.carry = state.carry, b""
        else:
            cut = state.carry.rfind(b"\n")
            if cut < 0:
                return {}
            complete, state.carry = state.carry[: cut + 1], state.carry[cut + 1:]
        lines = complete.decode("utf-8", errors="replace").splitlines()
        while len(state.header) < stream.header_lines and lines:
            state.header.append(lines.pop(0))
        if not stream.parser or not any(line.strip() for line in lines):
            return {}
        try:
            parsed = parsers.parse(stream.parser, "\n".join(state.header + lines) + "\n")
        except parsers.ParseError as exc:
            state.parse_errors += 1
            state.last_error = str(exc)[:300]
            return {"error": state.last_error}
        rows = parsed.get("rows") if isinstance(parsed.get("rows"), list) else parsed.get("events")
        self._append_rows(name, [r for r in rows or [] if isinstance(r, dict)], received)
        return parsed

    def _append_rows(self, name: str, rows: list[dict[str, Any]], received: str) -> None:
        if not rows:
            return
        state = self.state[name]
        path = self.series_path(name)
        has_header = path.exists() and path.stat().st_size > 0
        if state.columns is None and has_header:
            # Another recorder of the same session (a session stopped by a later task) wrote this file
            # first: its rows go under the header already there, never under a second one.
            with open(path, newline="", encoding="utf-8") as fh:
                state.columns = next(csv.reader(fh), None)
        if state.columns is None:
            seen: dict[str, None] = {}
            for row in rows:
                seen.update(dict.fromkeys(row))
            state.columns = ["host", "received_at", *[c for c in seen if c not in ("host", "received_at")]]
        with private.open_file(path, "a", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            if not has_header:
                writer.writerow(state.columns)
            for row in rows:
                values = {**row, "host": self.subject, "received_at": received}
                writer.writerow([cell(values.get(c)) for c in state.columns])
        state.rows += len(rows)

    # ------------------------------------------------------------------ what results point at
    def series_refs(self) -> list[dict[str, Any]]:
        """The series files written so far, as results point at them."""
        refs = []
        for name, stream in self.streams.items():
            state = self.state[name]
            if state.rows:
                refs.append({"path": self.relative(self.series_path(name)), "kind": stream.kind,
                             "x": stream.x, "columns": list(state.columns or []), "rows": state.rows,
                             "stream": name})
        return refs

    def artifacts(self) -> list[str]:
        return [self.relative(self.raw_path(name, suffix)) for name in self.streams for suffix in ("out", "err")
                if self.raw_path(name, suffix).exists()]

    def stats(self) -> dict[str, Any]:
        return {name: {"bytes": s.bytes_out, "stderr_bytes": s.bytes_err, "rows": s.rows,
                       "parse_errors": s.parse_errors, "last_parse_error": s.last_error}
                for name, s in self.state.items()}


@dataclass
class SessionView:
    """A session as a check sees it (``Context.session``)."""

    recorder: Recorder
    name: str
    chunks: dict[str, dict[str, Any]] = field(default_factory=dict)
    final: bool = False
    started: str | None = None
    ended: str | None = None
    end_reason: str | None = None
    interrupted: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)

    def chunk(self, stream: str) -> dict[str, Any]:
        """What the current poll parsed from ``stream`` (``{}`` when nothing new)."""
        return self.chunks.get(stream) or {}

    def rows(self, stream: str) -> Iterator[dict[str, Any]]:
        """Every row of ``stream``'s series so far, read back from its file, numbers typed."""
        path = self.recorder.series_path(stream)
        if not path.exists():
            return
        with open(path, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                yield {key: typed(value) for key, value in row.items()}

    def stderr_tail(self, stream: str, lines: int = 5) -> list[str]:
        """The last lines ``stream`` wrote to stderr."""
        return self._tail(self.recorder.raw_path(stream, "err"), lines)

    def output_tail(self, stream: str, lines: int = 5) -> list[str]:
        """The last lines ``stream`` wrote to stdout (its error, when it failed before its first sample)."""
        return self._tail(self.recorder.raw_path(stream, "out"), lines)

    @staticmethod
    def _tail(path: Path, lines: int) -> list[str]:
        if not path.exists():
            return []
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - 65536))
            text = fh.read().decode("utf-8", errors="replace")
        return [line[:300] for line in text.splitlines() if line.strip()][-lines:]

    def measured(self) -> dict[str, Any]:
        """The ``measured`` block of a result about this session."""
        out: dict[str, Any] = {"started": self.started, "ended": self.ended, "events": list(self.events)}
        if self.end_reason:
            out["end_reason"] = self.end_reason
        if self.interrupted:
            out["interrupted"] = self.interrupted
        return out
