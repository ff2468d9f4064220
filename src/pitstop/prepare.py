"""``pitstop prepare``: the class archive of Spark's JVM made once (:mod:`pitstop.engine.jvm` says
why and where). A child process runs a small job and two pit stops in a scratch home, its JVM told
to write the classes it loaded as it exits; the archive is moved into place only once that JVM
has exited well, so a process killed half way leaves nothing a later JVM would map."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pitstop.engine import jvm

WARM_UP = """
CREATE MAPPING orders (
    order_id BIGINT, region VARCHAR, amount DECIMAL(12,2), ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE
) TYPE File OPTIONS ('path'='{folder}', 'format'='json');
CREATE MAPPING revenue TYPE DuckDB;
CREATE JOB warm AS INSERT INTO revenue {select};
AWAIT JOB warm;
DROP JOB warm WITH SNAPSHOT warm_1;
CREATE JOB warm FROM SNAPSHOT warm_1 AS INSERT INTO revenue {select};
AWAIT JOB warm;
DROP JOB warm WITH SNAPSHOT warm_2;
CREATE JOB warm OPTIONS ('restoreFormat'='canonical') FROM SNAPSHOT warm_2 AS INSERT INTO revenue {select};
AWAIT JOB warm;
DROP JOB warm;
"""
SELECT = """SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR))
    GROUP BY window_start, window_end, region"""


def prepare(force: bool = False, timeout_s: float = 600) -> tuple[Path, bool]:
    """Make the archive unless it exists (or ``force``): (its path, whether it was made now).
    Raises ``RuntimeError`` saying why when it could not be made."""
    path = jvm.archive_path()
    if path is None:
        raise RuntimeError("no `java` found (JAVA_HOME or the PATH): Spark needs Java 17")
    if path.is_file() and not force:
        return path, False
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pitstop-prepare-") as scratch:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        env = dict(os.environ)
        env[jvm.ENV] = f"{env.get(jvm.ENV, '')} -XX:ArchiveClassesAtExit={tmp}".strip()
        env.pop("PITSTOP_HOME", None)
        log = Path(scratch) / "prepare.log"
        with open(log, "wb") as out:
            done = subprocess.run(
                [sys.executable, "-m", "pitstop.prepare", scratch],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
                check=False,
            )
        if done.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            tmp.unlink(missing_ok=True)
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the JVM wrote no class archive (exit {done.returncode}):\n{tail}")
        os.replace(tmp, path)
        jvm.record_origin(path)
    return path, True


def _warm_up(scratch: Path) -> None:
    """The child of :func:`prepare`: a job and two pit stops (a native restore, a canonical one)
    in a scratch home, then Spark stopped and its JVM awaited (it writes the archive as it exits)."""
    import json
    from datetime import datetime, timedelta

    from pitstop.driver import Driver
    from pitstop.engine import session
    from pitstop.executor import Executor
    from pitstop.manager import Manager
    from pitstop.settings import Settings

    folder = scratch / "orders"
    folder.mkdir()
    start = datetime(2024, 1, 1)
    for f in range(2):
        with open(folder / f"orders-{f}.json", "w") as handle:
            for i in range(f * 200, f * 200 + 200):
                ts = start + timedelta(seconds=90 * i)
                region = ("eu", "us", "apac")[i % 3]
                row = {"order_id": i, "region": region, "amount": i % 50, "ts": ts.isoformat()}
                handle.write(json.dumps(row) + "\n")
    settings = Settings(home=scratch / "home", master="local[2]", shuffle_partitions=2, trigger_ms=200)
    manager = Manager(settings)
    try:
        for _, result in Driver(Executor(manager)).run_script(WARM_UP.format(folder=folder, select=SELECT)):
            print(result.message or "", flush=True)
    finally:
        manager.close()
    spark = session.running_session()
    gateway = spark.sparkContext._gateway if spark is not None else None  # noqa: SLF001
    gateway_proc = getattr(gateway, "proc", None)
    session.stop_session()
    if gateway_proc is not None:  # the JVM exits once its stdin closes, writing the archive first
        gateway_proc.stdin.close()
        gateway_proc.wait(timeout=300)


if __name__ == "__main__":
    _warm_up(Path(sys.argv[1]))
