"""Shared test fixtures: where the real-output corpus lives (never copied into the project)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("CLUSTEREVAL_CORPUS", REPO.parent / "shared" / "corpus"))


def corpus_file(tool: str, name: str) -> Path:
    """Path of one real tool output in the shared corpus; skips the test when the corpus is absent."""
    path = CORPUS / tool / name
    if not path.exists():
        pytest.skip(f"corpus file {path} not available (set CLUSTEREVAL_CORPUS)")
    return path


def corpus_files(tool: str) -> list[Path]:
    folder = CORPUS / tool
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


def read_corpus(tool: str, name: str) -> str:
    return corpus_file(tool, name).read_bytes().decode("utf-8", errors="replace")


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus {CORPUS} not available (set CLUSTEREVAL_CORPUS)")
    return CORPUS


def key_value_text(values: dict) -> str:
    """A ``key: value`` probe's stdout as its shell prints it: one line per value (a list repeats its key),
    keys whose value is None left out."""
    lines = []
    for key, value in values.items():
        if value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            lines.append(f"{key}: {item}")
    return "\n".join(lines) + "\n"
