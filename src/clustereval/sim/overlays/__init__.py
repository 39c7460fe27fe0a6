"""Per-node views of system files for simulated nodes: sysfs trees, /etc settings, /proc entries.

Real tools and probes read fixed paths (``/sys/class/infiniband/*/fw_ver``, ``/etc/nccl.conf``,
``/proc/driver/nvidia/params``). A simulated node shows its own version of such paths through mounts
made inside its private mount namespace, so nothing on the host changes and two nodes can differ.

Each module in this package is an *overlay area* and exposes:

* ``render(settings, state, tree)``: add the node's files to ``tree`` (:class:`Tree`) from the merged
  profile ``settings`` (cluster defaults + node overrides, with ``faults``) and the rendered
  ``state`` (what ``node.json`` holds);
* ``FAULTS`` (optional): the fault keys it understands, so profiles using them validate;
* ``SHIMS`` (optional): ``{tool: shim file in sim/shims/}`` for the vendor tools it needs.

For every file the deepest directory that already exists on the host becomes a mount point: an
overlayfs with the host directory below and the node's files above (``/sys/class`` for a new
``/sys/class/infiniband``), or, where overlayfs refuses the lower filesystem (procfs), a bind mount
of the node's directory alone.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any


@dataclass
class Tree:
    """Files one node shows at absolute paths (text content, and the mode to give them).

    ``cluster_dir`` is the simulated cluster's directory (its ``ssh/`` holds the cluster key).
    """

    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    hidden: set[str] = field(default_factory=set)
    cluster_dir: Path | None = None

    def whiteout(self, path: str) -> None:
        """Hide a file of the host machine from the node (an overlayfs whiteout)."""
        if not path.startswith("/"):
            raise ValueError(f"overlay paths are absolute: {path!r}")
        self.hidden.add(path)

    def file(self, path: str, content: str, mode: int = 0o644) -> None:
        if not path.startswith("/"):
            raise ValueError(f"overlay paths are absolute: {path!r}")
        self.files[path] = (content, mode)

    def dir(self, path: str) -> None:
        """An empty directory that must exist (e.g. a class folder with no devices)."""
        self.dirs.add(path)


def areas() -> list[ModuleType]:
    return [importlib.import_module(f"{__name__}.{info.name}")
            for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")]


def faults() -> set[str]:
    return {name for module in areas() for name in getattr(module, "FAULTS", ())}


def shims() -> dict[str, str]:
    out: dict[str, str] = {}
    for module in areas():
        out.update(getattr(module, "SHIMS", {}))
    return out


def _mount_point(path: str, host_root: Path = Path("/")) -> str:
    """The deepest existing host directory above ``path`` (never ``/`` itself)."""
    parent = PurePosixPath(path).parent
    for candidate in [parent, *parent.parents]:
        if str(candidate) == "/":
            break
        if (host_root / str(candidate).lstrip("/")).is_dir():
            return str(candidate)
    return str(PurePosixPath(path).parts[0] + PurePosixPath(path).parts[1])


def _submounts(point: str, mountinfo: Path = Path("/proc/self/mountinfo")) -> list[str]:
    """The mount points below ``point`` on the host (``/dev/pts``, ``/dev/shm``), outermost only: an overlay of
    /dev keeps them (amd_gpu puts the device nodes a ROCm job opens, /dev/kfd and /dev/dri/*, in the node's /dev)."""
    found: list[str] = []
    for line in mountinfo.read_text().splitlines():
        fields = line.split()
        if len(fields) > 4:
            target = fields[4].encode().decode("unicode_escape")  # mountinfo escapes blanks as \040
            if target.startswith(point + "/") and target not in found:
                found.append(target)
    return [m for m in found if not any(m.startswith(o + "/") for o in found if o != m)]


def build(settings: dict[str, Any], state: dict[str, Any], node_dir: Path) -> list[str]:
    """Render every area's files under ``node_dir/overlay`` and return the shell lines that mount them
    (run inside the node's namespace before sshd starts)."""
    tree = Tree(cluster_dir=node_dir.parent.parent)
    for module in areas():
        module.render(settings, state, tree)
    paths = sorted(set(tree.files) | tree.dirs | tree.hidden)
    if not paths:
        return []
    points = sorted({_mount_point(p) for p in paths}, key=len)
    merged: list[str] = []
    for point in points:  # an outer mount point covers any inner one
        if not any(point == outer or point.startswith(outer + "/") for outer in merged):
            merged.append(point)
    upper_root, work_root = node_dir / "overlay", node_dir / "overlay-work"
    for path in tree.dirs:
        (upper_root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for path in tree.hidden - set(tree.files):
        target = upper_root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() and not target.is_symlink():
            os.mknod(target, stat.S_IFCHR | 0o000, os.makedev(0, 0))
    for path, (content, mode) in tree.files.items():
        target = upper_root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        target.chmod(mode)
    lines = []
    for index, point in enumerate(merged):
        upper = upper_root / point.lstrip("/")
        work = work_root / str(index)
        upper.mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        options = f"lowerdir={point},upperdir={upper},workdir={work}"
        # only /dev: other points keep the overlay-or-bind they always had (an overlay of /proc or /sys fails and
        # is bound instead, which the staging below has no fallback for)
        subs = _submounts(point) if point == "/dev" or point.startswith("/dev/") else []
        if subs:
            # mounted on a staging directory, the point's own mounts bound back in, then moved onto the point; no
            # bind fallback: a bind of the upper directory would leave a /dev holding only the node's files
            stage = node_dir / "stage" / str(index)
            stage.mkdir(parents=True, exist_ok=True)
            steps = [f"mount -t overlay overlay -o {shlex.quote(options)} {shlex.quote(str(stage))}"]
            steps += [f"mount --rbind {shlex.quote(m)} {shlex.quote(str(stage) + m[len(point):])}" for m in subs]
            steps.append(f"mount --move {shlex.quote(str(stage))} {shlex.quote(point)}")
            lines.append("{ " + " && ".join(steps) + "; }")
            continue
        lines.append(f"{{ mount -t overlay overlay -o {shlex.quote(options)} {shlex.quote(point)} 2>/dev/null "
                     f"|| mount --bind {shlex.quote(str(upper))} {shlex.quote(point)}; }}")
    return lines
