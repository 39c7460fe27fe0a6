"""YAML loading for clustereval's data files and users' settings.

libyaml's C loader when PyYAML was built with it (about ten times faster than the pure-Python loader:
the check catalogue alone took 0.4 s to read), else PyYAML's pure-Python safe loader. Both are safe
loaders: plain data only, no Python objects.
"""

from __future__ import annotations

from typing import IO, Any

import yaml

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(document: str | bytes | IO[str]) -> Any:
    """The YAML document as plain Python data (raises ``yaml.YAMLError`` when it is not YAML)."""
    return yaml.load(document, Loader=LOADER)
