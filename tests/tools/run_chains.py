"""Run many generated update chains (issue 23) on real Spark and real DuckDB files, and print a
summary: chains, steps by kind, failures. The sinks include PostgreSQL tables (a cluster started
from Debian's package, as the tests do) and a Kafka topic (the tests' Tansu broker). A failing
chain is shrunk, and its seed, its shrunk chain (ready to paste into tests/test_update_chains.py)
and the SQL it ran are printed once it is shrunk (a run stopped early keeps what it found), and
the failing seeds again beside the summary. Exit status 1 if any chain failed.

    make chains N=200 [SEED=1] [STEPS=8] [JOBS=2]
    .venv/bin/python tests/tools/run_chains.py --n 200 --seed 1 --steps 8 --jobs 2

With ``--jobs J``, J processes each run a share of the seeds (each with its Spark session, its
PostgreSQL cluster and its broker) and the summary adds theirs up: a chain spends much of its time
waiting on triggers and processes, so two share two cores well.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
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
from kafka_helpers import Broker, start_broker  # noqa: E402
from pg_helpers import Postgres  # noqa: E402
from pitstop.engine.session import stop_session  # noqa: E402
from pitstop.manager import Manager  # noqa: E402
from pitstop.settings import Settings  # noqa: E402


def play(folder: Path, chain: list[Step], pg: Postgres | None, kafka: Broker | None = None) -> None:
    """One chain on a home of its own, and a database of its own when there is a PostgreSQL.
    (Homes are removed only at the end: the process's one Spark session starts its Python
    workers through a script in the first home it opened.)"""
    home = folder / "home"
    settings = Settings(home=home, master="local[2]", shuffle_partitions=2, trigger_ms=200)
    url = pg.url(pg.database()) if pg is not None else None
    bootstrap = kafka.bootstrap if kafka is not None else None
    Player(lambda: Manager(settings), folder / "ev", home, pg_url=url, kafka=bootstrap).play(chain)


def fails(folders: Iterator[Path], pg: Postgres | None, kafka: Broker | None, chain: list[Step]) -> bool:
    try:
        play(next(folders), chain, pg, kafka)
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
    parser.add_argument("--no-postgres", action="store_true", help="no PostgreSQL sinks in the chains")
    parser.add_argument("--no-kafka", action="store_true", help="no Kafka sink in the chains")
    parser.add_argument("--jobs", type=int, default=1, help="processes running chains side by side")
    args = parser.parse_args()
    # SIGTERM (a CI timeout, kill): unwind, so that the PostgreSQL cluster and the broker stop.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.jobs > 1:
        return side_by_side(args)
    work = Path(tempfile.mkdtemp(prefix="pitstop-chains-"))
    work.chmod(0o755)  # the postgres user goes through it when this runs as root
    pg = None
    if not args.no_postgres and glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        pg = Postgres(work / "pg")  # tests/tools/install.sh installs it (make test does)
    kafka = None if args.no_kafka else start_broker(work / "kafka")  # Tansu, a dev dependency
    kinds: Counter[str] = Counter()
    failures: list[str] = []
    started = time.monotonic()
    try:
        for seed in range(args.seed, args.seed + args.n):
            chain = generate(seed, args.steps, pg=pg is not None, kafka=kafka is not None)
            kinds.update(type(s).__name__ for s in chain)
            kinds.update("Restore+rollback" for s in chain if isinstance(s, Restore) and s.rollback)
            try:
                play(work / f"chain{seed}", chain, pg, kafka)
                print(f"chain {seed}: ok ({len(chain)} steps)", flush=True)
                continue
            except ChainFailure as failure:
                found = failure
            print(f"chain {seed}: FAILED at {found}", flush=True)
            small = chain
            if not args.no_shrink:
                folders = (work / f"try{seed}-{i}" for i in range(100_000))
                small = shrink(chain, partial(fails, folders, pg, kafka))
                try:
                    play(work / f"small{seed}", small, pg, kafka)
                except ChainFailure as again:
                    found = again
            failures.append(
                f"chain seed {seed} fails at {found}\nshrunk chain ({len(small)} of {len(chain)} steps):\n  "
                + ",\n  ".join(repr(s) for s in small)
                + f"\nits SQL:\n{found.script}\n"
            )
            # At once, as well as at the end: a long run stopped early keeps what it found.
            print(failures[-1], flush=True)
    finally:
        stop_session()
        if pg is not None:
            pg.stop()
        if kafka is not None:
            kafka.stop()
        shutil.rmtree(work, ignore_errors=True)
    if failures:  # each printed with its shrunk chain when it was found
        print("failing chain seeds: " + ", ".join(f.split(" ", 3)[2] for f in failures), flush=True)
    print(summary(args.n, kinds, len(failures), time.monotonic() - started))
    print("summary-json: " + json.dumps({"n": args.n, "kinds": kinds, "failures": len(failures)}), flush=True)
    return 1 if failures else 0


def summary(n: int, kinds: Counter[str], failures: int, seconds: float) -> str:
    return (
        f"summary: {n} chain(s), {sum(v for k, v in kinds.items() if '+' not in k)} steps "
        f"({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}), {failures} failure(s), "
        f"{seconds / 60:.1f} min"
    )


def side_by_side(args: argparse.Namespace) -> int:
    """``--jobs J``: J processes of this script, each on a consecutive share of the seeds; their
    lines as they come, then one summary of all."""
    share, extra = divmod(args.n, args.jobs)
    started = time.monotonic()
    procs: list[subprocess.Popen[str]] = []
    seed = args.seed
    for w in range(args.jobs):
        n = share + (1 if w < extra else 0)
        if n == 0:
            continue
        flags = [f for f in ("no_shrink", "no_postgres", "no_kafka") if getattr(args, f)]
        command = [sys.executable, __file__, "--n", str(n), "--seed", str(seed), "--steps", str(args.steps)]
        command += ["--" + f.replace("_", "-") for f in flags]
        procs.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1))
        seed += n
    kinds: Counter[str] = Counter()
    failures = 0
    finished = 0

    def relay(proc: subprocess.Popen[str]) -> None:
        nonlocal failures, finished
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("summary-json: "):
                part = json.loads(line.removeprefix("summary-json: "))
                kinds.update(part["kinds"])
                failures += part["failures"]
                finished += part["n"]
            elif line.strip() and not line.startswith("summary: "):
                print(line, end="", flush=True)

    relays = [threading.Thread(target=relay, args=(p,)) for p in procs]
    for t in relays:
        t.start()
    try:
        for t in relays:
            t.join()
        codes = [p.wait() for p in procs]
    finally:  # interrupted: each process unwinds (its cluster and broker stop)
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait()
    if finished != args.n:
        print(f"only {finished} of {args.n} chain(s) reported: a process ended with {codes}", flush=True)
        return 1
    print(summary(args.n, kinds, failures, time.monotonic() - started))
    return 1 if failures or any(codes) else 0


if __name__ == "__main__":
    sys.exit(main())
