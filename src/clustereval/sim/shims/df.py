"""``df`` of a simulated node (stdlib only): the real GNU coreutils tool, with the node's own root filesystem.

df takes each mount's source and type from the kernel's mount table and its size from ``statvfs``, both the
machine's. When the node's profile sets ``system.root_fs`` (``/sim/system.json``), this runs the real
``/usr/bin/df`` and rewrites the row of ``/`` only (Filesystem, Type, size, Used, Avail, Use%; the inode
columns stay the machine's), re-laid in df's own table (coreutils 9.1 print_table: one space between
columns, each as wide as its widest cell or its minimum, text left- and numbers right-aligned, the last
column unpadded), for the layouts ``-P``, ``-k``, ``-h``, ``-H``, ``-T``, ``-a``, ``-l`` and ``--output``.
The row of ``/`` is the one mounted on ``/``, or, with operands, the row of an operand that lies on ``/``.
Anything that changes the units or the rows otherwise (``-B``, ``-i``, ``-t``, ``-x``, ``--total``, the
BLOCK_SIZE variables, ``--help``, ``--version``), and output this cannot re-lay byte for byte, is the real
tool's unchanged.
"""

import os
import subprocess
import sys

from simnode import node_view

REAL = "/usr/bin/df"
# the options whose layout this re-lays (and what they do to the size columns)
KNOWN = {"-a": "all", "--all": "all", "-h": "human", "--human-readable": "human", "-H": "si", "--si": "si",
         "-k": "kib", "-l": "local", "--local": "local", "-P": "posix", "--portability": "posix",
         "-T": "type", "--print-type": "type", "--sync": "sync", "--no-sync": "sync", "-v": "ignored"}
UNIT_VARIABLES = ("DF_BLOCK_SIZE", "BLOCK_SIZE", "BLOCKSIZE", "POSIXLY_CORRECT")
HEADERS = {"Filesystem": "source", "Type": "fstype", "Inodes": "itotal", "IUsed": "iused", "IFree": "iavail",
           "IUse%": "ipcent", "1K-blocks": "size", "1024-blocks": "size", "Size": "size", "Used": "used",
           "Avail": "avail", "Available": "avail", "Use%": "pcent", "Capacity": "pcent", "File": "file",
           "Mounted on": "target"}
# coreutils df.c field_data: each field's minimum width; source, fstype, file and target align left
MIN_WIDTHS = {"source": 14, "fstype": 4, "itotal": 5, "iused": 5, "iavail": 5, "ipcent": 4, "size": 5,
              "used": 5, "avail": 5, "pcent": 4, "file": 0, "target": 0}
LEFT = {"source", "fstype", "file", "target"}


def options(argv):
    """(the base of -h/-H sizes, None for 1K blocks; the operands), or None when the real tool must
    answer alone. The last of -h, -H and -k wins, as in df."""
    base, operands, rest = None, [], list(argv)
    flags = []
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            operands.extend(rest)
            break
        if arg == "--output" or arg.startswith("--output="):
            continue
        if arg.startswith("--"):
            flags.append(arg)
        elif arg.startswith("-") and len(arg) > 1:
            flags.extend("-" + letter for letter in arg[1:])
        else:
            operands.append(arg)
    for flag in flags:
        if flag not in KNOWN:
            return None
        base = {"human": 1024, "si": 1000, "kib": None}.get(KNOWN[flag], base)
    return base, operands


def human(amount, base):
    """gnulib human_readable with human_ceiling | human_autoscale (df -h: base 1024, -H: 1000)."""
    if amount < base:
        return str(amount)
    letters = "KMGTPEZY" if base == 1024 else "kMGTPEZY"
    tenths = rounding = exponent = 0
    while True:
        r10 = (amount % base) * 10 + tenths
        r2 = (r10 % base) * 2 + (rounding >> 1)
        amount, tenths = amount // base, r10 // base
        rounding = int(r2 + rounding != 0) if r2 < base else 2 + (base < r2 + rounding)
        exponent += 1
        if not (base <= amount and exponent < len(letters)):
            break
    if amount < 10:
        if rounding > 0:
            tenths, rounding = tenths + 1, 0
            if tenths == 10:
                amount, tenths = amount + 1, 0
        if amount < 10:
            return f"{amount}.{tenths}{letters[exponent - 1]}"
    if tenths + rounding > 0:
        amount += 1
        if amount == base and exponent < len(letters):
            return f"1.0{letters[exponent]}"
    return f"{amount}{letters[exponent - 1]}"


def root_cells(root, base):
    """df's cells for the node's ``/``: its source, type, size, Used, Avail and Use% (rounded up, of what
    non-root users may have)."""
    vfs = root["statvfs"]
    used_blocks, avail_blocks = vfs["blocks"] - vfs["bfree"], vfs["bavail"]
    sizes = {"size": vfs["blocks"], "used": used_blocks, "avail": avail_blocks}
    if base:
        cells = {k: human(v * vfs["frsize"], base) for k, v in sizes.items()}
    else:
        cells = {k: str(-(-v * vfs["frsize"] // 1024)) for k, v in sizes.items()}
    total = used_blocks + avail_blocks
    cells["pcent"] = f"{-(-used_blocks * 100 // total)}%" if total else "-"
    return {"source": root["source"], "fstype": root["fstype"], **cells}


def layout(rows, fields):
    widths = [max([len(row[k]) for row in rows] + [MIN_WIDTHS[f]]) for k, f in enumerate(fields)]
    lines = []
    for row in rows:
        cells = []
        for k, cell in enumerate(row):
            if fields[k] not in LEFT:
                cells.append(cell.rjust(widths[k]))
            else:
                cells.append(cell if k == len(fields) - 1 else cell.ljust(widths[k]))
        lines.append(" ".join(cells) + "\n")
    return "".join(lines)


def header_fields(line):
    tokens = line.replace("Mounted on", "Mounted\0on").split()
    fields = [HEADERS.get(token.replace("\0", " ")) for token in tokens]
    return None if None in fields else fields


def on_root(path):
    """Whether ``path`` lies on the filesystem mounted at ``/`` (no mount point between it and ``/``)."""
    try:
        real = os.path.realpath(path)
        with open("/proc/self/mountinfo") as fh:
            points = [line.split(" ")[4] for line in fh if len(line.split(" ")) > 4]
    except (OSError, ValueError):
        return False
    if not os.path.exists(real):
        return False
    points = [p.encode().decode("unicode_escape") if "\\" in p else p for p in points]
    return not any(p != "/" and (real == p or real.startswith(p + "/")) for p in points)


def rewrite(text, root, base, operands):
    lines = text.splitlines()
    fields = header_fields(lines[0]) if lines else None
    if not fields:
        return text
    rows = [lines[0].replace("Mounted on", "Mounted\0on").split()]
    rows[0] = [cell.replace("\0", " ") for cell in rows[0]]
    rows += [line.split(None, len(fields) - 1) for line in lines[1:]]
    if any(len(row) != len(fields) for row in rows) or layout(rows, fields) != text:
        return text
    cells = root_cells(root, base)
    target = fields.index("target") if "target" in fields else None
    by_operand = bool(operands) and len(rows) - 1 == len(operands)
    for k, row in enumerate(rows[1:]):
        if (on_root(operands[k]) if by_operand else target is not None and row[target] == "/"):
            for j, field in enumerate(fields):
                row[j] = cells.get(field, row[j])
    return layout(rows, fields)


def main(argv):
    root = node_view().get("root_fs")
    parsed = options(argv)
    if not root or parsed is None or any(os.environ.get(name) for name in UNIT_VARIABLES):
        sys.stdout.flush()
        os.execv(REAL, ["df", *argv])
    done = subprocess.run([REAL, *argv], stdout=subprocess.PIPE, text=True)
    sys.stdout.write(rewrite(done.stdout, root, *parsed))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
