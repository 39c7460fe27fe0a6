"""Mutations of real tool output used by the property tests and the parser fuzz benchmark.

Each mutation takes the original bytes and a ``random.Random`` and returns new bytes: the damage real
output suffers (cut at any byte, lines lost or repeated, CRLF, colour codes, launcher prefixes), what
copying it through a terminal, a document or a log pipeline does to its whitespace (tabs expanded or
spaces unexpanded, trailing blanks, every indentation doubled, the whole capture indented as a code
block), and plain noise. The whitespace changes leave the facts as they were: a parser must read the
same from them (``tests/unit/test_parser_tolerance.py``).
"""

from __future__ import annotations

import random
from collections.abc import Callable

Mutation = Callable[[bytes, random.Random], bytes]


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randint(0, len(data))]


def drop_lines(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    keep = [ln for ln in lines if rng.random() > 0.15]
    return b"\n".join(keep)


def duplicate_lines(data: bytes, rng: random.Random) -> bytes:
    out: list[bytes] = []
    for line in data.split(b"\n"):
        out.append(line)
        if rng.random() < 0.1:
            out.append(line)
    return b"\n".join(out)


def crlf(data: bytes, rng: random.Random) -> bytes:
    """Windows line endings (lines that already end in CRLF stay as they are)."""
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def _each_line(data: bytes, change: Callable[[bytes], bytes]) -> bytes:
    return b"\n".join(change(line) for line in data.split(b"\n"))


def _leading_columns(line: bytes) -> int:
    expanded = line.expandtabs(8)
    return len(expanded) - len(expanded.lstrip(b" "))


def tabs_expanded(data: bytes, width: int = 8) -> bytes:
    """Every tab turned into spaces to the next multiple of ``width`` (``expand -t WIDTH``, a terminal copy)."""
    return _each_line(data, lambda line: line.expandtabs(width))


def spaces_unexpanded(data: bytes) -> bytes:
    """Each run of 8 leading spaces turned into a tab (``unexpand``)."""
    def unexpand(line: bytes) -> bytes:
        body = line.lstrip(b" ")
        width = len(line) - len(body)
        return b"\t" * (width // 8) + b" " * (width % 8) + body
    return _each_line(data, unexpand)


def blanks_appended(data: bytes, blanks: bytes = b" \t ") -> bytes:
    """``blanks`` at the end of every non-blank line, before its CR where the line ends in CRLF."""
    def append(line: bytes) -> bytes:
        if not line.strip():
            return line
        return line[:-1] + blanks + b"\r" if line.endswith(b"\r") else line + blanks
    return _each_line(data, append)


def indentation_doubled(data: bytes) -> bytes:
    """Every line's indentation, in columns with tabs expanded, doubled (a copy re-indented wider)."""
    return _each_line(data, lambda line: b" " * (2 * _leading_columns(line)) + line.expandtabs(8).lstrip(b" "))


def indented_as_block(data: bytes, indent: bytes = b"    ") -> bytes:
    """Every non-blank line indented by ``indent`` (a capture pasted as a Markdown or RST code block)."""
    return _each_line(data, lambda line: indent + line if line.strip() else line)


def expand_tabs(data: bytes, rng: random.Random) -> bytes:
    return tabs_expanded(data, rng.choice((2, 4, 8)))


def unexpand_spaces(data: bytes, rng: random.Random) -> bytes:
    return spaces_unexpanded(data)


def trailing_blanks(data: bytes, rng: random.Random) -> bytes:
    return blanks_appended(data, rng.choice((b" ", b"\t", b"  \t ")))


def wider_indentation(data: bytes, rng: random.Random) -> bytes:
    return indentation_doubled(data)


def code_block(data: bytes, rng: random.Random) -> bytes:
    return indented_as_block(data, rng.choice((b"    ", b"  ", b"\t")))


def ansi(data: bytes, rng: random.Random) -> bytes:
    colours = [b"\x1b[1;31m", b"\x1b[0m", b"\x1b[32m", b"\x1b[K"]
    return b"\n".join(rng.choice(colours) + ln + b"\x1b[0m" if ln else ln for ln in data.split(b"\n"))


def srun_prefix(data: bytes, rng: random.Random) -> bytes:
    rank = rng.randint(0, 63)
    return b"\n".join(f"{rank}: ".encode() + ln for ln in data.split(b"\n"))


def mpirun_prefix(data: bytes, rng: random.Random) -> bytes:
    rank = rng.randint(0, 63)
    return b"\n".join(f"[1,{rank}]<stdout>:".encode() + ln for ln in data.split(b"\n"))


def flip_bytes(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return data
    buf = bytearray(data)
    for _ in range(rng.randint(1, 16)):
        buf[rng.randrange(len(buf))] = rng.randrange(256)
    return bytes(buf)


def insert_noise(data: bytes, rng: random.Random) -> bytes:
    pos = rng.randint(0, len(data))
    return data[:pos] + rng.randbytes(rng.randint(1, 64)) + data[pos:]


def random_bytes(data: bytes, rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(0, 512))


def empty(data: bytes, rng: random.Random) -> bytes:
    return b""


def swap_numbers(data: bytes, rng: random.Random) -> bytes:
    """Replace digits with other digits or with huge / negative / non-numeric tokens."""
    tokens = [b"-1", b"99999999999999999999", b"nan", b"N/A", b"1e309", b"0", b"-"]
    out = bytearray()
    for byte in data:
        if 48 <= byte <= 57 and rng.random() < 0.05:
            out += rng.choice(tokens)
        else:
            out.append(byte)
    return bytes(out)


MUTATIONS: dict[str, Mutation] = {
    "truncate": truncate, "drop_lines": drop_lines, "duplicate_lines": duplicate_lines, "crlf": crlf,
    "ansi": ansi, "srun_prefix": srun_prefix, "mpirun_prefix": mpirun_prefix, "flip_bytes": flip_bytes,
    "insert_noise": insert_noise, "random_bytes": random_bytes, "empty": empty, "swap_numbers": swap_numbers,
    "expand_tabs": expand_tabs, "unexpand_spaces": unexpand_spaces, "trailing_blanks": trailing_blanks,
    "wider_indentation": wider_indentation, "code_block": code_block,
}
