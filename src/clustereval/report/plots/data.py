"""Reading series files for figures: bounded, tolerant of torn files, never raising on bad data.

Every reader returns ``(rows, note)``: the rows it could use and, when it could not use the file, one line saying
why (the figure is then left out and the note shown instead).
"""

from __future__ import annotations

import csv
import itertools
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clustereval.series import SERIES_DIR

# A series file is read up to this many rows: a figure's work stays bounded however long a session ran
# (8 h at 1 s for 8 GPUs is 230,400 rows).
MAX_ROWS = 1_000_000
# Points drawn per line: more than a screen's width of pixels shows nothing more and only grows the file.
MAX_POINTS = 2_000


class Unusable(Exception):
    """A series file a figure cannot be drawn from; the message names the file and why."""


def series_file(run_dir: Path, relative: Any) -> Path:
    """The file a series reference names, refusing anything outside the run's ``series/`` folder."""
    text = str(relative or "")
    root = (run_dir / SERIES_DIR).resolve()
    path = (run_dir / text).resolve()
    if not text or root not in path.parents:
        raise Unusable(f"{text or '(no path)'}: not a file under {SERIES_DIR}/")
    return path


def read_columns(run_dir: Path, relative: str, needed: tuple[str, ...],
                 optional: tuple[str, ...] = ()) -> dict[str, tuple[str, ...]]:
    """The ``needed`` and ``optional`` columns of a series CSV as text cells (an optional column the file lacks
    is left out); lines with the wrong number of cells (a torn last line) are skipped.

    Raises ``Unusable`` for a missing, unreadable or garbage file, or one lacking a ``needed`` column.
    """
    path = series_file(run_dir, relative)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if not header:
                raise Unusable(f"{relative}: empty file (no header row)")
            missing = [c for c in needed if c not in header]
            if missing:
                raise Unusable(f"{relative}: no column {', '.join(missing)} in its header")
            rows = [cells for cells in itertools.islice(reader, MAX_ROWS) if len(cells) == len(header)]
    except FileNotFoundError:
        raise Unusable(f"{relative}: missing from the run directory") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise Unusable(f"{relative}: unreadable ({exc})") from None
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in header]
    return {c: columns[header.index(c)] for c in dict.fromkeys((*needed, *optional)) if c in header}


def numbers(cells: tuple[str, ...]) -> Any:
    """Cells as a float array, NaN where a cell is no finite number."""
    import numpy as np

    try:
        values = np.array(cells, dtype=float)
    except ValueError:  # an empty or N/A cell among them: cell by cell
        values = np.array([math.nan if (v := number(c)) is None else v for c in cells], dtype=float)
    values[~np.isfinite(values)] = np.nan
    return values


def timestamps(cells: tuple[str, ...]) -> Any:
    """Timestamp cells as epoch seconds (NaN where unreadable), each distinct text parsed once: every GPU of a
    sample shares one."""
    import numpy as np

    if not cells:
        return np.array([], dtype=float)
    distinct, inverse = np.unique(np.array(cells, dtype=str), return_inverse=True)
    parsed = np.array([math.nan if (at := seconds(str(c))) is None else at for c in distinct], dtype=float)
    return parsed[inverse]


def number(text: Any) -> float | None:
    """A finite number from a cell, or None."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def seconds(text: str) -> float | None:
    """A timestamp cell as epoch seconds: a number, ISO 8601 or nvidia-smi's ``2026/12/02 12:00:00.123``."""
    value = number(text)
    if value is not None:
        return value
    try:
        stamp = datetime.fromisoformat(str(text).strip().replace("/", "-"))
    except ValueError:
        return None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


def downsample(xs: Any, ys: Any, limit: int = MAX_POINTS) -> tuple[Any, Any]:
    """At most ``limit`` points: consecutive buckets averaged, so a long series keeps its shape."""
    import numpy as np

    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if len(xs) <= limit:
        return xs, ys
    starts = np.arange(0, len(xs), math.ceil(len(xs) / limit))
    counts = np.diff(np.append(starts, len(xs)))
    return np.add.reduceat(xs, starts) / counts, np.add.reduceat(ys, starts) / counts
