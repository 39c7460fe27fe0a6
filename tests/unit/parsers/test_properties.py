"""Properties every parser keeps, on real corpus output and on damaged versions of it.

* Any damage (truncation at any byte, dropped or repeated lines, CRLF, ANSI colour, random bytes,
  empty input) gives a JSON-serialisable result or a ParseError: never another exception.
* Output wrapped by ``srun -l`` or ``mpirun --tag-output`` parses to the same result as the clean one.
The registered parser function is called directly (not through ``parse``'s safety net), so a parser
bug shows up here instead of being turned into a ParseError.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustereval import parsers
from clustereval.parsers import _mutate
from clustereval.parsers._common import clean
from tests.conftest import CORPUS, corpus_files

TOOLS = [tool for tool in parsers.tools() if corpus_files(tool)]
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def samples(tool: str) -> list[bytes]:
    return [path.read_bytes() for path in corpus_files(tool)]


def outcome(tool: str, data: bytes) -> dict | None:
    """The parser's result, or None for a ParseError; anything else fails the test."""
    try:
        result = parsers.get(tool)(clean(data))
    except parsers.ParseError as exc:
        assert str(exc).strip(), f"{tool}: ParseError without a message"
        return None
    assert isinstance(result, dict), f"{tool}: returned {type(result).__name__}"
    json.dumps(result, allow_nan=False)
    for key in ("tool", "format", "complete", "warnings"):
        assert key in result, f"{tool}: result lacks {key!r}"
    return result


def test_every_corpus_tool_has_a_parser():
    if not CORPUS.is_dir():
        pytest.skip("corpus not available")
    folders = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
    missing = [name for name in folders if name not in parsers.tools()]
    assert missing == [], f"corpus tools without a parser: {missing}"


@pytest.mark.parametrize("tool", TOOLS)
@SETTINGS
@given(data=st.data())
def test_damaged_output_never_raises_anything_but_parse_error(tool, data):
    original = data.draw(st.sampled_from(samples(tool)))
    name = data.draw(st.sampled_from(sorted(_mutate.MUTATIONS)))
    seed = data.draw(st.integers(0, 2**32 - 1))
    outcome(tool, _mutate.MUTATIONS[name](original, random.Random(seed)))


@pytest.mark.parametrize("tool", TOOLS)
@SETTINGS
@given(data=st.data())
def test_truncation_at_any_byte(tool, data):
    original = data.draw(st.sampled_from(samples(tool)))
    cut = data.draw(st.integers(0, len(original)))
    outcome(tool, original[:cut])


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("wrap", ["srun_prefix", "mpirun_prefix", "crlf", "ansi"])
def test_launcher_wrapping_parses_to_the_same_result(tool, wrap):
    for original in samples(tool):
        clean_result = outcome(tool, original)
        wrapped = outcome(tool, _mutate.MUTATIONS[wrap](original, random.Random(7)))
        if clean_result is None:
            assert wrapped is None
            continue
        assert wrapped is not None
        strip = {"warnings"}
        assert {k: v for k, v in wrapped.items() if k not in strip} == \
            {k: v for k, v in clean_result.items() if k not in strip}


@pytest.mark.parametrize("tool", sorted(set(parsers.tools())))
@pytest.mark.parametrize("text", [b"", b"\n\n", b"\x00\xff\xfe garbage \x1b[31m", "ünïcödé ✓\n".encode()])
def test_trivial_inputs(tool, text):
    outcome(tool, text)


@pytest.mark.parametrize(("tool", "path"), [(tool, path) for tool in TOOLS for path in corpus_files(tool)],
                         ids=lambda item: getattr(item, "name", item))
def test_truncation_sweep_over_every_corpus_file(tool, path):
    """Forty evenly spaced cuts of every real output: a result or a ParseError, nothing else."""
    data = path.read_bytes()
    for cut in range(0, len(data), max(1, len(data) // 40)):
        outcome(tool, data[:cut])
