"""Mutations of real tool output used by the property tests and the parser fuzz benchmark.

Each mutation takes the original bytes and a ``random.Random`` and returns new bytes: the damage real
output suffers (cut at any byte, lines lost or repeated, CRLF, colour codes, launcher prefixes) and
plain noise.
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
}
