"""``findmnt`` of a simulated node (stdlib only): the real util-linux tool, with the node's own root filesystem.

``/proc/self/mountinfo`` is the kernel's and no mount can cover it, so the real findmnt would show the
machine's root. When the node's profile sets ``system.root_fs`` (``/sim/system.json``), this runs the real
``/usr/bin/findmnt`` on a copy of the mount table (``--tab-file``, a memfd) whose ``/`` line has the node's
device number, source, type and options; findmnt prints every layout (table, tree, ``-l``, ``-r``, ``-P``,
``-J``, ``-n``, ``-o``, ``-T``, ``-t``) itself. The size columns (SIZE, USED, AVAIL, USE%, and ``-D``) come
from ``statvfs``, which is the machine's: for the row of ``/`` only they are rewritten from the profile's
size, in findmnt's own units (``-b`` bytes, else util-linux's size_to_human_string). A layout this cannot
re-lay exactly (a cell with a space, ``--output-all``) keeps the real tool's numbers. Without ``root_fs``, or
for anything that reads another table (``--fstab``, ``--mtab``, ``--tab-file``, ``--poll``, ``--task``,
``--verify``, ``--help``, ``--version``), the real tool runs unchanged.
"""

import json
import os
import re
import subprocess
import sys

from simnode import node_view

REAL = "/usr/bin/findmnt"
MOUNTINFO = "/proc/self/mountinfo"
DEFAULT_COLUMNS = ["TARGET", "SOURCE", "FSTYPE", "OPTIONS"]
DF_COLUMNS = ["SOURCE", "FSTYPE", "SIZE", "USED", "AVAIL", "USE%", "TARGET"]
SIZE_COLUMNS = {"SIZE", "USED", "AVAIL", "USE%"}
RIGHT_ALIGNED = SIZE_COLUMNS | {"ID", "PARENT", "FREQ", "PASSNO", "TID"}
# findmnt's absolute width hints (misc-utils/findmnt.c infos[]): libsmartcols pads a column to its hint
MIN_WIDTHS = {"SIZE": 5, "USED": 5, "AVAIL": 5, "USE%": 3, "MAJ:MIN": 6, "ID": 2, "PARENT": 2, "FREQ": 1,
              "PASSNO": 1, "TID": 4}
SHORT_WITH_ARG = set("oOtSTMNFwdR")
LONG_WITH_ARG = {"--output", "--options", "--types", "--source", "--target", "--mountpoint", "--task",
                 "--tab-file", "--timeout", "--direction"}
OTHER_TABLES = {"-s", "--fstab", "-m", "--mtab", "-F", "--tab-file", "-p", "--poll", "-N", "--task", "-x",
                "--verify", "-h", "--help", "-V", "--version", "--output-all"}


def options(argv):
    """``[(option, value or None)]`` and the operands of a findmnt command line (getopt's reading)."""
    opts, operands, rest = [], [], list(argv)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            operands.extend(rest)
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name in LONG_WITH_ARG and not eq and rest:
                value = rest.pop(0)
            opts.append((name, value if (eq or name in LONG_WITH_ARG) else None))
        elif arg.startswith("-") and len(arg) > 1:
            for k, letter in enumerate(arg[1:], start=1):
                if letter in SHORT_WITH_ARG:
                    value = arg[k + 1:] or (rest.pop(0) if rest else "")
                    opts.append(("-" + letter, value))
                    break
                opts.append(("-" + letter, None))
        else:
            operands.append(arg)
    return opts, operands


def unescape(field):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def node_mountinfo(text, root):
    """The mount table with the node's ``/``: device, fs type, source and superblock options replaced."""
    out = []
    for line in text.splitlines(keepends=True):
        fields = line.rstrip("\n").split(" ")
        if len(fields) > 6 and fields[4] == "/" and "-" in fields[6:]:
            sep = fields.index("-", 6)
            fields[2] = root["majmin"]
            fields[sep + 1:sep + 4] = [root["fstype"], root["source"], root["super_options"]]
            line = " ".join(fields) + "\n"
        out.append(line)
    return "".join(out)


def mount_of(path, text):
    """The mount point holding ``path`` (the longest mount point above its real path), or None."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    if not os.path.exists(real):
        return None
    best = None
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            point = unescape(fields[4])
            inside = real == point or real.startswith(point.rstrip("/") + "/")
            if inside and (best is None or len(point) >= len(best)):
                best = point
    return best


def human(size):
    """util-linux's size_to_human_string (SIZE_SUFFIX_1LETTER): 1 decimal, rounded half up."""
    exp = 0
    while exp < 60 and size >= 1 << (exp + 10):
        exp += 10
    letter = "BKMGTPE"[exp // 10]
    whole, frac = (size >> exp, size % (1 << exp)) if exp else (size, 0)
    if frac:
        frac = ((frac * 1000 >> exp) + 50) // 100 * 10
        if frac == 100:
            whole, frac = whole + 1, 0
    if frac:
        return f"{whole}.{frac // 10}{letter}"
    return f"{whole}{letter}"


def root_cells(root, in_bytes):
    """findmnt's SIZE, USED, AVAIL and USE% of the node's ``/`` (a statvfs of the profile's size)."""
    vfs = root["statvfs"]
    size, used = vfs["frsize"] * vfs["blocks"], vfs["frsize"] * (vfs["blocks"] - vfs["bfree"])
    avail = vfs["frsize"] * vfs["bavail"]
    cells = {"SIZE": size, "USED": used, "AVAIL": avail}
    cells = {k: (v if in_bytes else human(v)) for k, v in cells.items()}
    cells["USE%"] = f"{(vfs['blocks'] - vfs['bfree']) / vfs['blocks'] * 100:.0f}%" if vfs["blocks"] else "-"
    return cells


def columns_of(opts):
    columns = DF_COLUMNS if any(o in ("-D", "--df") for o, _ in opts) else DEFAULT_COLUMNS
    for name, value in opts:
        if name in ("-o", "--output"):
            listed = [c.strip().upper() for c in value.lstrip("+").split(",") if c.strip()]
            columns = (columns + listed) if value.startswith("+") else listed
    return columns


def layout(rows, columns):
    """libsmartcols' plain table: one space between columns, each as wide as its widest cell (or its width
    hint), numbers right-aligned, the last column unpadded."""
    widths = [max([len(row[k]) for row in rows] + [MIN_WIDTHS.get(name, 0)]) for k, name in enumerate(columns)]
    lines = []
    for row in rows:
        cells = []
        for k, cell in enumerate(row):
            if columns[k] in RIGHT_ALIGNED:
                cells.append(cell.rjust(widths[k]))
            else:
                cells.append(cell if k == len(columns) - 1 else cell.ljust(widths[k]))
        lines.append(" ".join(cells) + "\n")
    return "".join(lines)


def rewrite(text, opts, columns, is_root, cells):
    """The real output with the size cells of the rows of ``/`` replaced; unchanged where this cannot
    re-lay the real tool's layout byte for byte."""
    flags = {o for o, _ in opts}
    if flags & {"-J", "--json"}:
        try:
            tree = json.loads(text)
        except ValueError:
            return text
        if json.dumps(tree, indent=3, ensure_ascii=False) + "\n" != text:
            return text

        def walk(items):
            for item in items:
                if is_root(item.get("target")):
                    item.update({k.lower(): v for k, v in cells.items() if k.lower() in item})
                walk(item.get("children") or [])

        walk(tree.get("filesystems") or [])
        return json.dumps(tree, indent=3, ensure_ascii=False) + "\n"
    if flags & {"-P", "--pairs"}:
        out = []
        for line in text.splitlines(keepends=True):
            target = re.search(r'(?:^| )TARGET="([^"]*)"', line)
            if is_root(target.group(1) if target else None):
                for name, value in cells.items():
                    line = re.sub(f'(^| ){re.escape(name)}="[^"]*"',
                                  lambda m, n=name, v=value: f'{m.group(1)}{n}="{v}"', line)
            out.append(line)
        return "".join(out)
    raw = bool(flags & {"-r", "--raw"})
    header = not flags & {"-n", "--noheadings"}
    lines = text.splitlines()
    rows = [line.split(" ") if raw else line.split() for line in lines]
    if any(len(row) != len(columns) for row in rows):
        return text
    rendered = "".join(" ".join(row) + "\n" for row in rows) if raw else layout(rows, columns)
    if rendered != text:
        return text
    target = columns.index("TARGET") if "TARGET" in columns else None
    for row in rows[1 if header else 0:]:
        if is_root(row[target].lstrip("├└│─ ") if target is not None else None):
            for k, name in enumerate(columns):
                if name in cells:
                    row[k] = str(cells[name])
    return "".join(" ".join(row) + "\n" for row in rows) if raw else layout(rows, columns)


def main(argv):
    root = node_view().get("root_fs")
    opts, operands = options(argv)
    if not root or {o for o, _ in opts} & OTHER_TABLES:
        sys.stdout.flush()
        os.execv(REAL, ["findmnt", *argv])
    with open(MOUNTINFO) as fh:
        table = node_mountinfo(fh.read(), root)
    fd = os.memfd_create("mountinfo", 0)
    os.write(fd, table.encode())
    os.set_inheritable(fd, True)
    command = [REAL, "--tab-file", f"/proc/self/fd/{fd}", *argv]
    columns = columns_of(opts)
    if not SIZE_COLUMNS & set(columns):
        sys.stdout.flush()
        os.execv(REAL, command)
    done = subprocess.run(command, pass_fds=(fd,), stdout=subprocess.PIPE, text=True)
    paths = [v for o, v in opts if o in ("-T", "--target", "-M", "--mountpoint")] + operands
    asked_root = bool(paths) and all(mount_of(p, table) == "/" for p in paths)

    def is_root(target):
        return target == "/" if target is not None else asked_root

    sys.stdout.write(rewrite(done.stdout, opts, columns, is_root,
                             root_cells(root, bool({o for o, _ in opts} & {"-b", "--bytes"}))))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
