"""Parsers for every tool clustereval runs: ``parse(tool, text) -> dict``.

Each tool has its own module (``clustereval.parsers.<tool_with_underscores>``) exposing
``parse(text) -> dict``; the module registers itself here with :func:`register`. Every result carries
``tool``, ``format`` (the detected sub-format), ``complete`` (False when output stops early; every row
read so far is still returned) and ``warnings`` (what was seen but not understood). The only exception
that ever leaves a parser is :class:`ParseError`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

from clustereval.parsers._common import clean
from clustereval.parsers.errors import ParseError
from clustereval.results import finite

Parser = Callable[[str], dict[str, Any]]
_REGISTRY: dict[str, Parser] = {}
_LOADED = False

__all__ = ["ParseError", "get", "parse", "register", "tools"]


def register(*names: str) -> Callable[[Parser], Parser]:
    """Register a parser function under one or more tool names (the corpus folder names)."""

    def deco(fn: Parser) -> Parser:
        for name in names:
            _REGISTRY[name] = fn
        return fn

    return deco


def _load_all() -> None:
    global _LOADED
    if _LOADED:
        return
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_") and info.name != "errors":
            importlib.import_module(f"{__name__}.{info.name}")
    _LOADED = True


def tools() -> list[str]:
    """All tool names a parser is registered for."""
    _load_all()
    return sorted(_REGISTRY)


def get(tool: str) -> Parser:
    """The raw parser function for ``tool`` (it expects already-cleaned text)."""
    _load_all()
    try:
        return _REGISTRY[tool]
    except KeyError:
        raise ParseError(f"no parser for tool {tool!r}; known tools: {', '.join(sorted(_REGISTRY))}") from None


def parse(tool: str, text: str | bytes | None) -> dict[str, Any]:
    """Parse ``text`` printed by ``tool``.

    The text is normalised first (decoding, CRLF, ANSI codes, ``srun -l`` / ``mpirun --tag-output``
    prefixes, trailing blanks, an indentation every line shares); infinite or NaN numbers in the result are
    None. Raises :class:`ParseError` when the output cannot be understood; never anything else.
    """
    fn = get(tool)
    cleaned = clean(text)
    try:
        # JSON has no infinite numbers: a tool that overflows (iperf3 printing 1e309) gives None, never inf.
        return finite(fn(cleaned))
    except ParseError:
        raise
    except RecursionError as exc:  # deeply nested garbage (e.g. XML bombs)
        raise ParseError(f"{tool}: output nested too deeply to parse ({exc})") from None
    except Exception as exc:  # a parser bug must still not escape as anything but ParseError
        raise ParseError(f"{tool}: internal parser fault on this input: {type(exc).__name__}: {exc}") from exc
