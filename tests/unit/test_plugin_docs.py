"""Every plugin's DOCUMENTATION is YAML ansible-doc can read, naming the options the plugin documents."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

PLUGINS = sorted((Path(__file__).resolve().parents[2] / "plugins").glob("*/*.py"))


def _documentation(path: Path) -> str | None:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "DOCUMENTATION":
            return node.value.value
    return None


@pytest.mark.parametrize("path", [p for p in PLUGINS if _documentation(p) is not None], ids=lambda p: p.stem)
def test_documentation_is_yaml(path):
    doc = yaml.safe_load(_documentation(path))
    assert isinstance(doc, dict) and doc.get("short_description"), path
    for name, option in (doc.get("options") or {}).items():
        assert option.get("description"), f"{path.name}: option {name} has no description"
