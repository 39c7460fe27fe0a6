"""Helpers the software-stack overlay areas share (not an area: the leading underscore keeps it out of
``overlays.areas()``): installed copies of shims, files several areas add lines to, symbolic links."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import Any

SHIM_DIR = Path(__file__).resolve().parent.parent / "shims"


def shim_text(name: str, **constants: Any) -> str:
    """A shim's source as an installed program of the node: run by the node's python3 without
    site-packages (the shims use the standard library only), with module constants set
    (``INSTALLED=...`` replaces the line ``INSTALLED = None``)."""
    body = (SHIM_DIR / name).read_text()
    if body.startswith("#!"):
        body = body.split("\n", 1)[1]
    for constant, value in constants.items():
        line = f"\n{constant} = None\n"
        if line not in body:
            raise ValueError(f"shim {name} has no `{constant} = None` line to set")
        body = body.replace(line, f"\n{constant} = {value!r}\n", 1)
    return "#!/usr/bin/python3 -IS\n" + body


def shim_module(name: str) -> ModuleType:
    """A shim loaded as a module, for the tables it holds (banners of the versions it can print)."""
    spec = importlib.util.spec_from_file_location(f"clustereval_sim_shim_{name.removesuffix('.py')}",
                                                  SHIM_DIR / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def append_lines(tree: Any, path: str, lines: list[str]) -> None:
    """Add lines to a system file the node shows (``/etc/group``): the version another area already
    rendered, else the host's own."""
    if path in tree.files:
        text, mode = tree.files[path]
    else:
        try:
            text, mode = Path(path).read_text(encoding="utf-8"), Path(path).stat().st_mode & 0o7777
        except OSError:
            text, mode = "", 0o644
    if text and not text.endswith("\n"):
        text += "\n"
    tree.file(path, text + "".join(line + "\n" for line in lines), mode)


def symlink(tree: Any, node: str, path: str, target: str) -> None:
    """A symbolic link the node shows at ``path`` (``/usr/local/cuda -> cuda-12.4``).

    Tree has no links, so it is made in the node's overlay upper directory, where the mounts pick it
    up (a host file at the same path is hidden: the link stands in for it)."""
    tree.whiteout(path)
    if tree.cluster_dir is None:
        return  # rendering for inspection only: nothing is mounted
    link = Path(tree.cluster_dir) / "nodes" / node / "overlay" / path.lstrip("/")
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(target, link)
