"""pitstop's benchmark: ``python bench/run.py`` (about 10 minutes on 2 cores) or ``--quick`` (small
sizes, 2 runs per case, about 2-3 minutes: fixed costs dominate there, so its ratios are indicative
and the issue's targets are judged on the full run).

Cases, each measured side by side with its baseline in the same run, interleaved:

1. Throughput: a 1 h tumbling COUNT/SUM/MAX over 10k keys from JSON files, as a pitstop job
   (``CREATE JOB`` + ``AWAIT JOB``) and as a hand-written Structured Streaming job in the same Spark
   session (same settings), and hand-written with Spark's default settings (its own process).
2. Update downtime: ``DROP JOB ... WITH SNAPSHOT`` to the first batch committed by the updated job
   (a filter more) created ``FROM SNAPSHOT``, for several state sizes, in both restore formats; the
   floor is the query on a fresh checkpoint.
3. Statement latency without Spark (100 jobs, 1,000 snapshots), ``pitstop run -c`` and the shell.
4. Scale: throughput and downtime at three sizes each.

The last line is a summary for scripts:
``throughput_ratio=X default_settings_ratio=X downtime_ratio=X catalog_p99_ms=X export_keys_per_s=X``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import data  # noqa: E402

PYTHON = sys.executable
PITSTOP = str(Path(PYTHON).parent / "pitstop")


class Worker:
    """A ``bench/worker.py`` process: one Spark session, one command at a time."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.proc = subprocess.Popen(
            [PYTHON, str(BENCH / "worker.py"), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )
        self._answer()  # the session is up

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("@@BENCH "):
                result: dict[str, Any] = json.loads(line[len("@@BENCH ") :])
                if "error" in result:
                    raise RuntimeError(f"{self.mode} worker: {result['error']}\n{result.get('trace', '')}")
                return result
        raise RuntimeError(f"{self.mode} worker exited with {self.proc.wait()}")

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write('{"op": "quit"}\n')
            self.proc.stdin.flush()
            self.proc.wait(timeout=60)
        except Exception:  # noqa: BLE001 - a worker that will not quit is killed
            self.proc.kill()


# -- statistics and printing ----------------------------------------------------------------------
def med(values: list[float]) -> float:
    return statistics.median(values)


def spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    """``median (min–max)``."""
    if not values:
        return "-"
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(med(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows]
    return "\n".join(lines)


def say(text: str = "") -> None:
    print(text, flush=True)


def log(text: str) -> None:
    print(f"  .. {datetime.now():%H:%M:%S} {text}", file=sys.stderr, flush=True)


# -- machine ----------------------------------------------------------------------------------------
def machine() -> list[str]:
    def version(cmd: list[str]) -> str:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            return (out.stdout + out.stderr).strip().splitlines()[0]
        except Exception:  # noqa: BLE001
            return "?"

    mem = "?"
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import duckdb
    import pyarrow
    import pyspark

    return [
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"- machine: {os.cpu_count()} cores (nproc), {mem} memory, {cpu}, {platform.platform()}",
        f"- Python {platform.python_version()}, PySpark {pyspark.__version__}, "
        f"{version(['java', '-version'])}, DuckDB {duckdb.__version__}, pyarrow {pyarrow.__version__}",
        f"- load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
        "(other people's processes share this machine: timings are noisy)",
    ]


# -- 1 and 4a. throughput ---------------------------------------------------------------------------
def throughput(
    sizes: list[int], reps: int, same: Worker, default: Worker, default_sizes: list[int]
) -> dict[int, dict[str, list[float]]]:
    """Per size, seconds of each case; reps interleaved, and the case order rotates per rep.
    The Spark-defaults case (~10 s of fixed cost per run) runs only at ``default_sizes``."""
    folders = {n: str(data.events(n)) for n in sizes}
    warm = str(data.events(min(sizes)))
    log("warm-up (JIT, class loading) in both sessions")
    same.call("throughput_pitstop", folder=warm)
    same.call("throughput_handwritten", folder=warm)
    default.call("throughput_handwritten", folder=warm)
    cases = [
        ("pitstop", lambda f: same.call("throughput_pitstop", folder=f)),
        ("handwritten", lambda f: same.call("throughput_handwritten", folder=f)),
        ("default", lambda f: default.call("throughput_handwritten", folder=f)),
    ]
    out: dict[int, dict[str, list[float]]] = {n: defaultdict(list) for n in sizes}
    rows_out: dict[int, dict[str, set[int]]] = {n: defaultdict(set) for n in sizes}
    for rep in range(reps):
        order = cases[rep % 3 :] + cases[: rep % 3]
        for n in sizes:
            for name, run in order:
                if name == "default" and n not in default_sizes:
                    continue
                r = run(folders[n])
                out[n][name].append(r["seconds"])
                rows_out[n][name].add(r["rows_out"])
                log(f"throughput n={n:,} rep {rep + 1}: {name} {r['seconds']:.2f} s")
    for n in sizes:
        answers = {v for s in rows_out[n].values() for v in s}
        if len(answers) != 1:
            raise RuntimeError(
                f"throughput n={n}: the cases emitted different row counts {dict(rows_out[n])}"
            )
    return out


# -- 2 and 4b. downtime -----------------------------------------------------------------------------
# auto: the unchanged stage starts on the snapshot's native copy of its checkpoint (what a user
# gets by default); canonical: seeded from the snapshot's rows (what a changed stage gets).
FORMATS = ("auto", "canonical")


def downtime(
    sizes: list[int], reps: int, same: Worker
) -> tuple[dict[str, list[dict[str, Any]]], list[float]]:
    for k in sizes:
        data.state_events(k)
    results: dict[str, list[dict[str, Any]]] = defaultdict(list)
    floors: list[float] = []
    same.call("floor")  # warm-up, as every case gets: the first export in a session reads state
    for fmt in FORMATS:  # with cold code paths (0.5 s more at 10k keys)
        same.call("downtime", keys=sizes[0], fmt=fmt)
    for rep in range(reps):
        for k in sizes:
            floors.append(same.call("floor")["floor_s"])
            for fmt in FORMATS:
                r = same.call("downtime", keys=k, fmt=fmt)
                results[f"{fmt} {k}"].append(r)
                log(
                    f"downtime keys={k:,} {fmt} rep {rep + 1}: {r['downtime_s']:.2f} s "
                    f"(native: {r['native']}; floor {floors[-1]:.2f} s)"
                )
    return results, floors


# -- 3. latency -------------------------------------------------------------------------------------
def latency(calls: int, cli_reps: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="pitstop-bench-latency-")) / "home"
    try:
        out = subprocess.run(
            [PYTHON, str(BENCH / "latency.py"), str(home), str(calls)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        result: dict[str, Any] = json.loads(
            next(ln for ln in out.splitlines() if ln.startswith("@@BENCH "))[8:]
        )
        env = {**os.environ, "PITSTOP_HOME": str(home)}
        run_times = []
        for _ in range(cli_reps):
            t = time.perf_counter()
            subprocess.run([PITSTOP, "run", "-c", "SHOW JOBS"], env=env, capture_output=True, check=True)
            run_times.append(time.perf_counter() - t)
        result["pitstop run -c"] = run_times
        try:
            result["pitstop shell"] = shell_times(env, cli_reps)
        except Exception as exc:  # noqa: BLE001 - reported in the table instead
            result["pitstop shell"] = f"failed: {type(exc).__name__}"
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)
    return result


def shell_times(env: dict[str, str], reps: int) -> list[float] | str:
    probe = subprocess.run([PITSTOP, "shell", "--help"], capture_output=True, env=env)
    if probe.returncode != 0:
        return "no `pitstop shell` command"
    import pexpect

    times = []
    for _ in range(reps):
        t = time.perf_counter()
        child = pexpect.spawn(PITSTOP, ["shell"], env=env, dimensions=(40, 120), timeout=30)
        child.expect("pitstop>")  # the prompt, drawn between terminal escape codes
        times.append(time.perf_counter() - t)
        # Quitting may wait for Spark, which the shell starts in the background to resume the
        # home's jobs; only the prompt is timed, so the shell is not waited for.
        child.sendline("\\q")
        try:
            child.expect(pexpect.EOF, timeout=5)
        except pexpect.TIMEOUT:
            pass
        finally:
            child.close(force=True)
    return times


# -- report -----------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and 2 runs per case, about 2 minutes"
    )
    parser.add_argument("--reps", type=int, help="runs per case (default 3; 2 with --quick)")
    args = parser.parse_args()
    if args.quick:
        tp_sizes, main_n = [50_000, 100_000, 200_000], 200_000
        dt_sizes = [10_000, 50_000, 100_000]
        calls, cli_reps = 300, 2
    else:
        tp_sizes, main_n = [500_000, 1_000_000, 2_000_000], 2_000_000
        dt_sizes = [10_000, 100_000, 1_000_000]
        calls, cli_reps = 1000, 5
    reps = args.reps or (2 if args.quick else 3)

    say(f"# pitstop benchmark{' (--quick)' if args.quick else ''}")
    say()
    for line in machine():
        say(line)
    say()
    started = time.perf_counter()
    log("generating data (cached under bench/.data)")
    for n in tp_sizes:
        data.events(n)

    log("starting workers (Spark session start is excluded from every timing)")
    same = Worker("pitstop")
    default = Worker("default")
    try:
        tp = throughput(tp_sizes, reps, same, default, [main_n] if args.quick else tp_sizes)
        default.close()
        dt, floors = downtime(dt_sizes, reps, same)
    finally:
        default.close()
        same.close()
    log("statement latency")
    lat = latency(calls, cli_reps)
    (data.DATA / "last-run.json").write_text(
        json.dumps({"throughput": tp, "downtime": dt, "floors": floors, "latency": lat}, indent=1)
    )

    # 1. Throughput
    say(f"## 1. Throughput: {main_n:,} JSON events, 1 h tumbling COUNT/SUM/MAX per 10k keys")
    say()
    eps = {name: [main_n / s for s in secs] for name, secs in tp[main_n].items()}
    rows = []
    labels = {
        "pitstop": "pitstop job (CREATE JOB + AWAIT JOB)",
        "handwritten": "hand-written, same Spark settings",
        "default": "hand-written, Spark defaults",
    }
    for name in ("pitstop", "handwritten", "default"):
        ratio = med(eps["pitstop"]) / med(eps[name])
        rows.append([labels[name], spread(tp[main_n][name], "{:.2f}"), spread(eps[name]), f"{ratio:.2f}×"])
    say(table(["case", "seconds", "events/s", "pitstop / case"], rows))
    say()
    throughput_ratio = med(eps["pitstop"]) / med(eps["handwritten"])
    default_ratio = med(eps["pitstop"]) / med(eps["default"])

    # 2. Downtime
    say("## 2. Update downtime: DROP JOB ... WITH SNAPSHOT → first batch of the job FROM SNAPSHOT")
    say()
    floor = med(floors)
    say(
        "Floor (same query, fresh checkpoint, no state, CREATE JOB → first commit): "
        f"{spread(floors, '{:.2f}')} s"
    )
    say()
    rows = []
    worst = {fmt: 0.0 for fmt in FORMATS}
    export_rates: dict[int, list[float]] = {}
    for k in dt_sizes:
        for fmt in FORMATS:
            rs = dt[f"{fmt} {k}"]
            down = [r["downtime_s"] for r in rs]
            bound = 1.5 * floor + k / 1e6
            worst[fmt] = max(worst[fmt], (med(down) - k / 1e6) / floor)
            rates = [r["keys"] / r["export_s"] for r in rs]
            export_rates.setdefault(k, []).extend(rates)
            how = {True: "native", False: "rows"}
            rows.append(
                [
                    f"{k:,}",
                    f"{fmt} ({'/'.join(sorted({how[r['native']] for r in rs}))})",
                    spread(down, "{:.2f}"),
                    f"{bound:.2f}",
                    "met" if med(down) <= bound else "MISSED",
                    spread([r["cut_s"] for r in rs], "{:.2f}"),
                    spread([r["export_s"] for r in rs], "{:.2f}"),
                    spread([r["create_s"] for r in rs], "{:.2f}"),
                    spread([r["first_batch_s"] for r in rs], "{:.2f}"),
                    spread(rates),
                    spread([r["keys"] / r["restore_s"] for r in rs]),
                    f"{med([(r['snapshot_bytes'] - r['native_bytes']) / r['keys'] for r in rs]):.1f}",
                    f"{med([r['native_bytes'] / r['keys'] for r in rs]):.1f}",
                ]
            )
    say(
        table(
            [
                "state keys",
                "restoreFormat",
                "downtime s",
                "target s",
                "",
                "cut s",
                "export s",
                "CREATE s",
                "→ 1st batch s",
                "export keys/s",
                "restore keys/s",
                "rows bytes/key",
                "native bytes/key",
            ],
            rows,
        )
    )
    say()
    say(
        "downtime = DROP JOB WITH SNAPSHOT (stop at the cut + export) + CREATE JOB FROM SNAPSHOT + its "
        "first micro-batch (1,000 new events, and with `canonical` every key of state as a seed) "
        "committed. Target = 1.5 × floor + 1 s per million keys. Restore keys/s = keys / (end of "
        "DROP → first commit). Export writes both the rows (Parquet) and the native copy (hard links)."
    )
    say()
    say(
        "(downtime − 1 s/M keys) / floor, worst over the sizes: "
        + ", ".join(f"{fmt} {worst[fmt]:.2f}" for fmt in FORMATS)
        + " (target ≤ 1.5; the summary line reports `auto`, what a job gets by default)"
    )
    say()

    # 3. Latency
    say("## 3. Statement latency (no Spark; 100 jobs, 1,000 snapshots in the catalog)")
    say()
    rows = []
    p99s = []
    for label in ("SHOW JOBS", "SHOW SNAPSHOTS", "DESCRIBE SNAPSHOT", "DESCRIBE JOB"):
        r = lat[label]
        if "error" in r:
            rows.append([label, "-", "-", "-", r["error"]])
            continue
        if label != "DESCRIBE JOB":
            p99s.append(r["p99_ms"])
        rows.append(
            [label, f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}", f"{r['max_ms']:.2f}", f"{r['calls']} calls"]
        )
    say(table(["statement", "p50 ms", "p99 ms", "max ms", ""], rows))
    say()
    say(f"Spark started during the statements: {lat['spark_started']}")
    say(f'`pitstop run -c "SHOW JOBS"`, start to exit: {spread(lat["pitstop run -c"], "{:.2f}")} s')
    shell = lat["pitstop shell"]
    if isinstance(shell, str):
        say(f"`pitstop shell`, start to first prompt: not measured ({shell})")
    else:
        say(f"`pitstop shell`, start to first prompt: {spread(shell, '{:.2f}')} s")
    say()

    # 4. Scale
    say("## 4. Scale")
    say()
    rows = []
    for n in tp_sizes:
        e = {name: [n / s for s in secs] for name, secs in tp[n].items()}
        rows.append(
            [
                f"{n:,}",
                spread(e["pitstop"]),
                spread(e["handwritten"]),
                spread(e.get("default", [])),
                f"{med(e['pitstop']) / med(e['handwritten']):.2f}",
                f"{med(e['pitstop']) / med(e['default']):.2f}" if e.get("default") else "-",
            ]
        )
    say(
        table(
            ["events", "pitstop ev/s", "same settings ev/s", "Spark defaults ev/s", "ratio", "vs defaults"],
            rows,
        )
    )
    say()
    rows = [
        [
            f"{k:,}",
            *[spread([r["downtime_s"] for r in dt[f"{fmt} {k}"]], "{:.2f}") for fmt in FORMATS],
            *[
                f"{(med([r['downtime_s'] for r in dt[f'{fmt} {k}']]) - k / 1e6) / floor:.2f}"
                for fmt in FORMATS
            ],
            spread(export_rates[k]),
        ]
        for k in dt_sizes
    ]
    say(
        table(
            [
                "state keys",
                *[f"downtime s ({fmt})" for fmt in FORMATS],
                *[f"(downtime − 1 s/M keys) / floor ({fmt})" for fmt in FORMATS],
                "export keys/s",
            ],
            rows,
        )
    )
    say()
    catalog_p99 = max(p99s) if p99s else float("nan")
    export_rate = med(export_rates[dt_sizes[-1]])
    say(
        f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"wall time {time.perf_counter() - started:.0f} s"
    )
    say()
    say(
        f"throughput_ratio={throughput_ratio:.2f} default_settings_ratio={default_ratio:.2f} "
        f"downtime_ratio={worst['auto']:.2f} catalog_p99_ms={catalog_p99:.1f} "
        f"export_keys_per_s={export_rate:.0f}"
    )


if __name__ == "__main__":
    main()
