"""Run many generated update chains (issue 23) on real Spark and real DuckDB files, and print a
summary: chains, steps, restores, snapshots, suspends, failures. A failing chain is shrunk, and its
seed, its shrunk chain (ready to paste into tests/test_update_chains.py) and the SQL it ran are
printed. Exit status 1 if any chain failed.

    make chains N=200 [SEED=1] [STEPS=8]
    .venv/bin/python tests/tools/run_chains.py --n 200 --seed 1 --steps 8
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))
# As in the test suite: the JVM's C1 compiler alone starts Spark on half the CPU (conftest.py).
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", '--driver-java-options "-XX:TieredStopAtLevel=1" pyspark-shell')

from chains import ChainFailure, Player, Restore, Step, generate, shrink  # noqa: E402
from pitstop.engine.manager import Manager  # noqa: E402
from pitstop.engine.session import stop_session  # noqa: E402
from pitstop.settings import Settings  # noqa: E402


def play(folder: Path, chain: list[Step]) -> None:
    """One chain on a home of its own. (Homes are removed only at the end: the process's one
    Spark session starts its Python workers through a script in the first home it opened.)"""
    home = folder / "home"
    settings = Settings(home=home, master="local[2]", shuffle_partitions=2, trigger_ms=200)
    Player(lambda: Manager(settings), folder / "ev", home).play(chain)


def fails(folders: Iterator[Path], chain: list[Step]) -> bool:
    try:
        play(next(folders), chain)
    except ChainFailure:
        return True
    return False


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=20, help="chains to run")
    parser.add_argument("--seed", type=int, default=1, help="the first chain's seed")
    parser.add_argument("--steps", type=int, default=8, help="steps per chain after the first job")
    parser.add_argument("--no-shrink", action="store_true", help="report a failing chain as it is")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pitstop-chains-"))
    kinds: Counter[str] = Counter()
    failures: list[str] = []
    started = time.monotonic()
    try:
        for seed in range(args.seed, args.seed + args.n):
            chain = generate(seed, args.steps)
            kinds.update(type(s).__name__ for s in chain)
            kinds.update("Restore+rollback" for s in chain if isinstance(s, Restore) and s.rollback)
            try:
                play(work / f"chain{seed}", chain)
                print(f"chain {seed}: ok ({len(chain)} steps)", flush=True)
                continue
            except ChainFailure as failure:
                found = failure
            print(f"chain {seed}: FAILED at {found}", flush=True)
            small = chain
            if not args.no_shrink:
                folders = (work / f"try{seed}-{i}" for i in range(100_000))
                small = shrink(chain, partial(fails, folders))
                try:
                    play(work / f"small{seed}", small)
                except ChainFailure as again:
                    found = again
            failures.append(
                f"chain seed {seed} fails at {found}\nshrunk chain ({len(small)} of {len(chain)} steps):\n  "
                + ",\n  ".join(repr(s) for s in small)
                + f"\nits SQL:\n{found.script}\n"
            )
    finally:
        stop_session()
        shutil.rmtree(work, ignore_errors=True)
    minutes = (time.monotonic() - started) / 60
    print("\n".join(failures))
    print(
        f"summary: {args.n} chain(s), {sum(v for k, v in kinds.items() if '+' not in k)} steps "
        f"({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}), {len(failures)} failure(s), "
        f"{minutes:.1f} min"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
