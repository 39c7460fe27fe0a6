"""Fuzz every parser with mutated real output: prints crashes (must be 0) and throughput.

Usage: python benchmarks/fuzz_parsers.py [--inputs 100000] [--seed 1]
Each input is a corpus file (../shared/corpus, or $CLUSTEREVAL_CORPUS) put through one to three
mutations from clustereval.parsers._mutate, then given to the tool's registered parser function
directly (after the shared cleaning), so a parser bug is a crash here, not a ParseError. A crash is
any exception other than ParseError, a non-dict result, a result that is not JSON, or one parse
taking longer than --slow seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

from clustereval import parsers
from clustereval.parsers import _mutate
from clustereval.parsers._common import clean
from clustereval.results import finite

REPO = Path(__file__).resolve().parents[1]


class Hang(Exception):
    """One parse ran past the hang limit."""


def _alarm(signum, frame):
    raise Hang()


def corpus_dir() -> Path:
    return Path(os.environ.get("CLUSTEREVAL_CORPUS", REPO.parent / "shared" / "corpus"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--inputs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slow", type=float, default=2.0, help="seconds after which one parse counts as a hang")
    args = ap.parse_args()
    corpus = corpus_dir()
    samples = [(tool, path.read_bytes()) for tool in parsers.tools() if (corpus / tool).is_dir()
               for path in sorted((corpus / tool).iterdir()) if path.is_file()]
    if not samples:
        print(f"no corpus under {corpus}", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    names = sorted(_mutate.MUTATIONS)
    outcomes: Counter[str] = Counter()
    per_tool: Counter[str] = Counter()
    crashes: list[str] = []
    slowest = (0.0, "")
    started = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    for i in range(args.inputs):
        if i and i % 10_000 == 0:
            print(f"  {i} inputs, {outcomes['crash']} crashes, {time.perf_counter() - started:.0f} s", flush=True)
        tool, data = rng.choice(samples)
        chain = [rng.choice(names) for _ in range(rng.randint(1, 3))]
        for name in chain:
            data = _mutate.MUTATIONS[name](data, rng)
        t0 = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, args.slow * 5)
        try:
            result = finite(parsers.get(tool)(clean(data)))  # what parsers.parse returns, bugs uncaught
            if not isinstance(result, dict):
                raise TypeError(f"returned {type(result).__name__}")
            json.dumps(result, allow_nan=False)
            outcomes["complete" if result.get("complete") else "partial"] += 1
        except parsers.ParseError:
            outcomes["parse_error"] += 1
        except Hang:
            outcomes["hang"] += 1
            crashes.append(f"#{i} {tool} {'+'.join(chain)}: still parsing after {args.slow * 5:.0f} s")
        except Exception as exc:
            outcomes["crash"] += 1
            if len(crashes) < 20:
                crashes.append(f"#{i} {tool} {'+'.join(chain)}: {type(exc).__name__}: {exc}\n"
                               + "".join(traceback.format_exc(limit=3)))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        elapsed = time.perf_counter() - t0
        if elapsed > slowest[0]:
            slowest = (elapsed, f"{tool} {'+'.join(chain)}")
        if elapsed > args.slow:
            outcomes["crash"] += 1
            crashes.append(f"#{i} {tool} {'+'.join(chain)}: took {elapsed:.1f} s")
        per_tool[tool] += 1
    total = time.perf_counter() - started
    print(f"inputs: {args.inputs} across {len(per_tool)} tools ({len(samples)} corpus files)")
    print(f"outcomes: {dict(sorted(outcomes.items()))}")
    print(f"crashes: {outcomes['crash']} (hangs: {outcomes['hang']})")
    print(f"throughput: {args.inputs / total:,.0f} inputs/s ({total:.1f} s); slowest single parse "
          f"{slowest[0] * 1000:.0f} ms ({slowest[1]})")
    for crash in crashes:
        print("---", crash, sep="\n")
    return 1 if outcomes["crash"] or outcomes["hang"] else 0


if __name__ == "__main__":
    sys.exit(main())
