"""ofed_info -s parser against the real version strings in the shared corpus."""

from __future__ import annotations

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import read_corpus


@pytest.mark.parametrize("name,flavour,version,release", [
    ("ofed_info-s-OFED-internal-5.0-1.0.0.0.txt", "OFED-internal", "5.0-1.0.0.0", "5.0"),
    ("ofed_info-s-doca-ofed-OFED-internal-24.10-1.1.4.0.200.txt", "OFED-internal", "24.10-1.1.4.0.200", "24.10"),
    ("ofed_info-s-mlnx-ofed-24.10-NO-trailing-colon-as-published.txt", "MLNX_OFED_LINUX", "24.10-1.1.4.0",
     "24.10"),
    ("ofed_info-s-mlnx-ofed-4.4-2.0.7.0-connectx3.txt", "MLNX_OFED_LINUX", "4.4-2.0.7.0", "4.4"),
    ("ofed_info-s-mlnx-ofed-5.8-1.1.2.1-md-trailing-spaces.txt", "MLNX_OFED_LINUX", "5.8-1.1.2.1", "5.8"),
])
def test_version_strings(name, flavour, version, release):
    out = parse("ofed_info", read_corpus("ofed_info", name))
    assert out["complete"] is True
    assert (out["flavour"], out["version"], out["release"]) == (flavour, version, release)


def test_missing_colon_is_noted():
    out = parse("ofed_info", read_corpus("ofed_info", "ofed_info-s-mlnx-ofed-24.10-NO-trailing-colon-as-published.txt"))
    assert out["warnings"] and out["distribution"] == "MLNX_OFED"


@pytest.mark.parametrize("text", ["", "bash: ofed_info: command not found\n", "5.8\n"])
def test_unusable_output_raises(text):
    with pytest.raises(ParseError, match="ofed_info"):
        parse("ofed_info", text)
