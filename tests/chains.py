"""Update chains (issue 23): a model of a job and its pit stops, a seeded generator of chains, a
runner that plays a chain on real Spark and real DuckDB files and checks every sink against the
model after every step, and a shrinker that makes a failing chain small enough to keep as a test.

The job reads one File mapping ``ev (id, k, v, ts)`` with a 5-minute watermark and writes one
DuckDB table per branch; each branch is a TUMBLE window by ``k`` with some of ``COUNT(*)``,
``SUM(v)``, ``MIN(v)``, ``MAX(v)`` and perhaps a filter ``v >= x``. A chain is a list of steps:
input arriving (one file, some of it out of order and late), the first ``CREATE JOB``, a pit stop
(``DROP JOB ... WITH SNAPSHOT``, then ``CREATE JOB ... FROM SNAPSHOT`` with a changed job: a branch
added, dropped or renamed, a filter changed, an aggregate added or dropped, a window resized by k;
``restoreFormat`` auto or canonical), ``CREATE SNAPSHOT`` while it runs, a restore from an older
snapshot with or without ``sinkRollback``, and ``ALTER JOB SUSPEND`` / ``RESUME``.

The model is the documented rules (README "How it works", DESIGN.md section 4), not pitstop's code:

- a branch's clock is the greatest event time its window has read (after its filter), less the
  watermark delay; it never goes back, across pit stops included. One micro-batch reads all the
  files there are, so an event is late when its window had closed (end <= clock) before its file's
  batch began; a window is written once its end is at or below the clock;
- a restored stage keeps its open windows (folded into the new size on a resize) and its clock; for
  the run after the restore an event is also late when its *old* window had closed at the
  snapshot's clock (the old job would have dropped it); a new stage starts empty on the job's clock
  (the least of the snapshot's stages' clocks), dropped stages are forgotten;
- aggregates are matched by call; a call new at the place of an old call that is gone takes its
  state (a changed function); the other new calls start empty in windows in flight (NULL until an
  event arrives);
- a restore reads every file after the snapshot's cut; ``sinkRollback`` first removes every row
  written after the cut; without it those rows stay and are written again.

The truth for each sink is computed by DuckDB from the events the model kept per window.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from pitstop.engine.manager import Manager

EPOCH = datetime(2024, 1, 1)
DELAY = 5 * 60  # the mapping's WATERMARK delay, seconds
KEYS = ("a", "b", "c")
FUNCTIONS = {
    "n": "COUNT(*)",
    "total": "SUM(v)",
    "lo": "MIN(v)",
    "hi": "MAX(v)",
    "first": "MIN_BY(v, ts)",  # ties on ts are common here: (ts, v) pairs decide
    "last": "MAX_BY(v, ts)",
    "mean": "AVG(v)",
    "kinds": "COUNT(DISTINCT v % 5)",
}
STATE_TYPE = {
    "n": "BIGINT",
    "total": "BIGINT",
    "lo": "BIGINT",
    "hi": "BIGINT",
    "first": "PAIR",
    "last": "PAIR",
    "mean": "BIGINT, BIGINT",
    "kinds": "SET",
}
BASE_SIZES = (10, 30, 60)  # minutes
EARLY = "earlyResultsMillis"


# -- the job -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Branch:
    """One INSERT: a stage named ``stage`` writing table ``sink``: a TUMBLE window of ``size``
    minutes by ``k`` (appended rows), or a running aggregate by ``k`` (``size`` 0; rows replaced
    by key)."""

    sink: str
    stage: str
    size: int  # minutes; 0: a running aggregate
    aggs: tuple[str, ...]  # keys of FUNCTIONS, in SELECT order
    where: int | None = None  # v >= where
    slide: int = 0  # minutes: a HOP window of ``size`` sliding by ``slide``; 0: TUMBLE
    session: bool = False  # a SESSION window whose gap is ``size``
    dedup: str = ""  # "distinct": SELECT DISTINCT id, k; "first": ROW_NUMBER() by id = 1 (no aggs)
    firsts: str = ""  # a window reading a ROW_NUMBER() by id = 1 stage of this name (two stages)

    @property
    def running(self) -> bool:
        return self.size == 0 and not self.dedup

    @property
    def windowed(self) -> bool:
        """A TUMBLE or HOP window: early results apply to it."""
        return self.size > 0 and not self.session

    def windows_of(self, ts: int) -> list[int]:
        """The starts of the windows an event at ``ts`` (seconds) is in."""
        size = self.size * 60
        if not self.slide:
            return [ts - ts % size]
        slide = self.slide * 60
        first = ts - ts % slide
        return [s for s in range(first, ts - size, -slide)]

    def sql(self) -> str:
        cols = ", ".join(f"{FUNCTIONS[a]} AS {a}" for a in self.aggs)
        where = f" WHERE v >= {self.where}" if self.where is not None else ""
        hint = f"/*+ STAGE({self.stage}) */"
        if self.dedup == "distinct":
            return f"INSERT INTO {self.sink} SELECT {hint} DISTINCT id, k FROM ev{where}"
        if self.dedup == "first":
            rn = "ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts) AS rn"
            numbered = f"SELECT {hint} id, k, ts, {rn} FROM ev{where}"
            return f"INSERT INTO {self.sink} SELECT id, k, ts FROM ({numbered}) WHERE rn = 1"
        if self.running:
            return f"INSERT INTO {self.sink} SELECT {hint} k, {cols} FROM ev{where} GROUP BY k"
        source, cte = "ev", ""
        if self.firsts:  # each id's first event, then the window
            source = f"firsts_{self.sink}"
            rn = "ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts) AS rn"
            numbered = f"SELECT /*+ STAGE({self.firsts}) */ id, k, v, ts, {rn} FROM ev"
            cte = f"WITH {source} AS (SELECT id, k, v, ts FROM ({numbered}) WHERE rn = 1) "
        if self.session:
            tvf = f"SESSION(TABLE {source}, DESCRIPTOR(ts), INTERVAL '{self.size}' MINUTE)"
        elif self.slide:
            sizes = f"INTERVAL '{self.size}' MINUTE, INTERVAL '{self.slide}' MINUTE"
            tvf = f"HOP(TABLE {source}, DESCRIPTOR(ts), {sizes})"
        else:
            tvf = f"TUMBLE(TABLE {source}, DESCRIPTOR(ts), INTERVAL '{self.size}' MINUTE)"
        return (
            f"{cte}INSERT INTO {self.sink} SELECT {hint} window_start, window_end, k, {cols} "
            f"FROM TABLE({tvf}){where} GROUP BY window_start, window_end, k"
        )

    @property
    def key_columns(self) -> list[str]:
        if self.dedup:
            return ["id", "k", "ts"] if self.dedup == "first" else ["id", "k"]
        return ["k"] if self.running else ["window_start", "window_end", "k"]


Job = tuple[Branch, ...]


def job_sql(job: Job) -> str:
    return "BEGIN\n  " + ";\n  ".join(b.sql() for b in job) + ";\nEND"


# -- steps ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Input:
    """One file of ``n`` events: most within ``advance`` minutes after the latest event time so
    far, a share ``late`` up to 90 minutes before it, a share ``dup`` copies of earlier events."""

    seed: int
    n: int
    advance: int
    late: float
    dup: float = 0.0  # a share sent again: exact copies of events of earlier files


@dataclass(frozen=True)
class Start:
    job: Job
    early: bool = False  # OPTIONS ('earlyResultsMillis'='200'): windows' rows as they change


@dataclass(frozen=True)
class Update:
    """``DROP JOB c WITH SNAPSHOT``, then ``CREATE JOB c FROM SNAPSHOT`` it with ``job``."""

    job: Job
    fmt: str = "auto"
    early: bool = False


@dataclass(frozen=True)
class Snapshot:
    """``CREATE SNAPSHOT`` of the running job; the job goes on."""


@dataclass(frozen=True)
class Restore:
    """``DROP JOB c``, then ``CREATE JOB c FROM SNAPSHOT`` the ``which``-th snapshot (an older one)."""

    which: int
    job: Job
    rollback: bool
    fmt: str = "auto"
    early: bool = False
    # 'acceptSinkGap': the snapshot was taken past a cut the sinks were rolled back to since
    # (what the job wrote between the two is gone from the sinks and is not written again)
    accept_gap: bool = False


@dataclass(frozen=True)
class Suspend:
    pass


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class Kill:
    """A ``pitstop run`` process resumes the job, ``input`` arrives, and the process is killed
    with SIGKILL ``after_ms`` later."""

    input: Input
    after_ms: int


@dataclass(frozen=True)
class Serve:
    """``pitstop serve`` resumes the job, ``input`` arrives, a client awaits it; SIGTERM."""

    input: Input


Step = Input | Start | Update | Snapshot | Restore | Suspend | Resume | Kill | Serve


# -- the model -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Event:
    id: int
    k: str
    v: int
    ts: int  # seconds after EPOCH

    def json(self) -> str:
        at = (EPOCH + timedelta(seconds=self.ts)).isoformat(sep=" ")
        return json.dumps({"id": self.id, "k": self.k, "v": self.v, "ts": at})


Acc = dict[str, Any]  # aggregate column -> accumulator (None: empty; MIN_BY/MAX_BY: a (ts, v) pair)


@dataclass
class StageModel:
    branch: Branch
    clock: int | None  # seconds; None: no event yet (a running aggregate has none)
    windows: dict[tuple[int, str], Acc] = field(default_factory=dict)  # (start, k) -> accumulators
    late_before: list[tuple[int, int]] = field(default_factory=list)  # (old size or gap s, old clock)
    committed: bool = False  # its query has committed a batch (a snapshot then has a native copy)
    reseed: bool = False  # restored from the rows: the seeds' batch writes every group again
    seen: dict[int, int | None] = field(default_factory=dict)  # dedup: key -> expires at (None: never)
    early: bool = False  # a TUMBLE or HOP with early results: rows replaced as windows change
    firsts_late: list[int] = field(default_factory=list)  # a chained ROW_NUMBER's old clocks, this run

    def copy(self) -> StageModel:
        return StageModel(
            self.branch,
            self.clock,
            {w: dict(a) for w, a in self.windows.items()},
            [],
            self.committed,
            seen=dict(self.seen),
            early=self.early,
        )


@dataclass
class Cut:
    name: str
    stages: dict[str, StageModel]
    files: int  # files read
    appended: dict[str, list[dict[str, Any]]]  # each append sink's rows at the cut
    keyed: dict[str, dict[tuple[Any, ...], dict[str, Any]]]  # each keyed sink's rows at the cut
    gapped: bool = False


def merge(fn: str, acc: Any, value: Any) -> Any:
    if acc is None:
        return value
    if fn == "mean":  # (sum, count)
        return (acc[0] + value[0], acc[1] + value[1])
    if fn == "kinds":
        return acc | value
    if fn in ("lo", "first"):
        return min(acc, value)
    if fn in ("hi", "last"):
        return max(acc, value)
    return acc + value


def contribution(fn: str, e: Event) -> Any:
    if fn == "mean":
        return (e.v, 1)
    if fn == "kinds":
        return frozenset({e.v % 5})
    if fn in ("first", "last"):
        return (e.ts, e.v)
    return 1 if fn == "n" else e.v


def finish(fn: str, acc: Any) -> Any:
    if fn == "kinds":  # the set's size; an empty (added) set is 0
        return len(acc) if acc is not None else 0
    if acc is None:
        return None
    if fn == "mean":
        return float(acc[0]) / acc[1]
    return acc[1] if fn in ("first", "last") else acc


class Model:
    def __init__(self) -> None:
        self.events: list[list[Event]] = []  # per file
        self.next_id = 0
        self.frontier = 0
        self.stages: dict[str, StageModel] = {}
        self.read = 0  # files read by the running job
        self.state = "none"  # none | running | suspended
        self.sinks: dict[str, list[dict[str, Any]]] = {}  # append sinks: their rows, in write order
        # Sinks whose rows are replaced by key: a running aggregate's (k), and a window table an
        # early-results job wrote (window_start, window_end, k; with its `early` column).
        self.keyed: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
        self.columns: dict[str, list[str]] = {}  # each sink's columns, in the order they appeared
        self.cuts: list[Cut] = []

    def rows(self, sink: str) -> list[dict[str, Any]]:
        if sink in self.keyed:
            return list(self.keyed[sink].values())
        return self.sinks[sink]

    # events
    def arrive(self, step: Input) -> list[Event]:
        rnd = random.Random(step.seed)
        out = []
        earlier = [e for f in self.events for e in f]
        for _ in range(step.n):
            if earlier and rnd.random() < step.dup:
                out.append(rnd.choice(earlier))  # delivered again (at least once): the same event
                continue
            if rnd.random() < step.late:
                ts = max(0, self.frontier - rnd.randint(0, 90 * 60))
            else:
                ts = self.frontier + rnd.randint(0, step.advance * 60)
            out.append(Event(self.next_id, rnd.choice(KEYS), rnd.randint(1, 50), ts))
            self.next_id += 1
        self.frontier = max([self.frontier, *(e.ts for e in out)])
        self.events.append(out)
        return out

    # one micro-batch per query: every file not read yet (a query runs one only when it has input:
    # new files, or the seeds of a stage restored from the rows)
    def batch(self) -> None:
        pending = [e for f in self.events[self.read :] for e in f]
        self.read = len(self.events)
        for st in self.stages.values():
            if pending or st.reseed:
                self._stage_batch(st, pending)

    def _stage_batch(self, st: StageModel, events: list[Event]) -> None:
        b = st.branch
        st.committed = True
        clocked = events  # what sets the clock: the rows the branch's first stage reads
        if b.firsts:  # the chained ROW_NUMBER first: late below the clock, then each id once
            kept = []
            for e in events:
                if st.clock is not None and e.ts < st.clock or any(e.ts < wm for wm in st.firsts_late):
                    continue
                if e.id not in st.seen:
                    st.seen[e.id] = e.ts + DELAY
                    kept.append(e)
            clocked = [e for e in events if not any(e.ts < wm for wm in st.firsts_late)]
            events = kept
        passed = [e for e in events if b.where is None or e.v >= b.where]
        if not b.firsts:
            clocked = passed
        touched: set[tuple[int, str]] = set(st.windows) if st.reseed else set()
        st.reseed = False
        size = b.size * 60
        if b.session:
            self._session_batch(st, passed)
            return
        if b.dedup:
            self._dedup_batch(st, passed)
            return
        for e in passed:
            if b.running:
                starts = [0]
            elif any(e.ts - e.ts % s + s <= wm for s, wm in st.late_before):
                continue  # the old job would have dropped it: its old window had closed
            else:
                # Late per window: one whose end the clock had passed before this batch.
                starts = [w for w in b.windows_of(e.ts) if st.clock is None or w + size > st.clock]
            for start in starts:
                acc = st.windows.setdefault((start, e.k), {a: None for a in b.aggs})
                for a in b.aggs:
                    acc[a] = merge(a, acc[a], contribution(a, e))
                touched.add((start, e.k))
        if b.running:
            for key in sorted(touched):
                acc = st.windows[key]
                row = {"k": key[1], **{a: finish(a, v) for a, v in acc.items()}}
                self.keyed[b.sink][(key[1],)] = row  # the whole row: other columns NULL
            return
        if st.early:  # each window the batch changed: its row as it is now (open: early)
            for start, k in sorted(touched):
                row = self._window_row(b, start, k, st.windows[(start, k)])
                self.keyed[b.sink][(row["window_start"], row["window_end"], k)] = {**row, "early": True}
        if clocked:
            top = max(e.ts for e in clocked) - DELAY
            st.clock = top if st.clock is None else max(st.clock, top)
        if b.firsts:
            st.seen = {k: x for k, x in st.seen.items() if x is None or x > st.clock}
        self._emit(st)

    def _dedup_batch(self, st: StageModel, passed: list[Event]) -> None:
        """Deduplication by ``id``: an event whose id was seen (and, for ROW_NUMBER, has not
        expired: first event + delay at or below the clock) is dropped; ROW_NUMBER also drops
        an event below the clock (late) or, in the run after a restore, below the snapshot's."""
        b = st.branch
        st.reseed = False
        first = b.dedup == "first"
        for e in passed:
            if first and (
                st.clock is not None and e.ts < st.clock or any(e.ts < wm for _, wm in st.late_before)
            ):
                continue
            if e.id in st.seen:
                continue
            st.seen[e.id] = e.ts + DELAY if first else None
            row = {"id": e.id, "k": e.k}
            if first:
                row["ts"] = EPOCH + timedelta(seconds=e.ts)
            self.sinks[b.sink].append(row)
        if first and passed:
            top = max(e.ts for e in passed) - DELAY
            st.clock = top if st.clock is None else max(st.clock, top)
            st.seen = {k: x for k, x in st.seen.items() if x is None or x > st.clock}

    def _session_batch(self, st: StageModel, passed: list[Event]) -> None:
        """Sessions: an event is late when ``ts + gap`` is at or below the clock (or ``ts + old gap``
        below the snapshot's clock, in the run after a restore); the batch's events and the open
        sessions of their key merge where they touch or overlap; a session closes once its end
        (last event + gap) is at or below the clock. ``windows``: (start, k) -> accumulators with
        the session's end under ``__end``."""
        b = st.branch
        gap = b.size * 60
        keys: set[str] = {k for _, k in st.windows} if st.reseed else set()
        st.reseed = False
        new: dict[str, list[tuple[int, int, Acc]]] = {}
        for e in passed:
            if any(e.ts + g <= wm for g, wm in st.late_before):
                continue
            if st.clock is not None and e.ts + gap <= st.clock:
                continue
            new.setdefault(e.k, []).append((e.ts, e.ts + gap, {a: contribution(a, e) for a in b.aggs}))
            keys.add(e.k)
        for k in keys:
            spans = [(start, acc["__end"], acc) for (start, kk), acc in st.windows.items() if kk == k]
            spans += new.get(k, [])
            for start, _, _ in spans:
                st.windows.pop((start, k), None)
            merged: list[list[Any]] = []
            for start, end, acc in sorted(spans, key=lambda x: (x[0], x[1])):
                values = {a: acc.get(a) for a in b.aggs}
                if merged and start <= merged[-1][1]:
                    last = merged[-1]
                    last[1] = max(last[1], end)
                    for a in b.aggs:
                        if values[a] is not None:
                            last[2][a] = merge(a, last[2][a], values[a])
                else:
                    merged.append([start, end, dict(values)])
            for start, end, acc in merged:
                st.windows[(start, k)] = {**acc, "__end": end}
        if passed:
            top = max(e.ts for e in passed) - DELAY
            st.clock = top if st.clock is None else max(st.clock, top)
        for (start, k), acc in sorted(st.windows.items()):
            if st.clock is not None and acc["__end"] <= st.clock:
                self.sinks[b.sink].append(
                    {
                        "window_start": EPOCH + timedelta(seconds=start),
                        "window_end": EPOCH + timedelta(seconds=acc["__end"]),
                        "k": k,
                        **{a: finish(a, acc[a]) for a in b.aggs},
                    }
                )
                del st.windows[(start, k)]

    @staticmethod
    def _window_row(b: Branch, start: int, k: str, acc: Acc) -> dict[str, Any]:
        return {
            "window_start": EPOCH + timedelta(seconds=start),
            "window_end": EPOCH + timedelta(seconds=start + b.size * 60),
            "k": k,
            **{a: finish(a, v) for a, v in acc.items()},
        }

    def _emit(self, st: StageModel) -> None:
        """Windows the clock has passed: written once (appended, or replacing the window's early
        row in a keyed table), or, with early results, already written; their state goes."""
        b = st.branch
        size = b.size * 60
        for (start, k), acc in sorted(st.windows.items()):
            if st.clock is not None and start + size <= st.clock:
                row = self._window_row(b, start, k, acc)
                if b.sink in self.keyed:
                    self.keyed[b.sink][(row["window_start"], row["window_end"], k)] = {**row, "early": False}
                else:
                    self.sinks[b.sink].append(row)
                del st.windows[(start, k)]
        if b.sink in self.keyed and st.clock is not None:  # the batch its clock closes them in
            closed = EPOCH + timedelta(seconds=st.clock)
            for row in self.keyed[b.sink].values():
                if row["early"] and row["window_end"] <= closed:
                    row["early"] = False

    # statements
    def start(self, job: Job, early: bool = False) -> None:
        self.stages = {b.stage: StageModel(b, None, early=early and b.windowed) for b in job}
        for b in job:
            self._sink_columns(b, early)
        self.state = "running"
        self.batch()

    def _sink_columns(self, b: Branch, early: bool = False) -> None:
        cols = self.columns.setdefault(b.sink, list(b.key_columns))
        cols += [a for a in b.aggs if a not in cols]
        if b.running:
            self.keyed.setdefault(b.sink, {})
        elif early and b.windowed and b.sink not in self.keyed:
            # An early-results job keys the table by window: the rows there were final.
            self.keyed[b.sink] = {
                (r["window_start"], r["window_end"], r["k"]): {**r, "early": False}
                for r in self.sinks.pop(b.sink, [])
            }
            cols.append("early")
        elif b.sink not in self.keyed:
            self.sinks.setdefault(b.sink, [])

    def cut(self, name: str) -> Cut:
        stages = {n: st.copy() for n, st in self.stages.items()}
        for st in self.stages.values():  # a chained ROW_NUMBER is a stage of its own in a snapshot
            if st.branch.firsts:
                first = Branch(st.branch.sink, st.branch.firsts, 0, (), dedup="first")
                stages[st.branch.firsts] = StageModel(
                    first, st.clock, seen=dict(st.seen), committed=st.committed
                )
        c = Cut(
            name,
            stages,
            self.read,
            {s: [dict(r) for r in rows] for s, rows in self.sinks.items()},
            {s: {k: dict(r) for k, r in rows.items()} for s, rows in self.keyed.items()},
        )
        self.cuts.append(c)
        return c

    def restore(self, c: Cut, job: Job, rollback: bool, fmt: str = "auto", early: bool = False) -> None:
        if rollback:
            for sink in self.sinks:
                self.sinks[sink] = [dict(r) for r in c.appended.get(sink, [])]
            for sink in self.keyed:
                if sink in c.keyed:
                    self.keyed[sink] = {k: dict(r) for k, r in c.keyed[sink].items()}
                else:  # keyed since: its rows at the cut were final
                    self.keyed[sink] = {
                        (r["window_start"], r["window_end"], r["k"]): {**r, "early": False}
                        for r in c.appended.get(sink, [])
                    }
            # A snapshot taken after this cut now holds state whose output is gone.
            for later in self.cuts[self.cuts.index(c) + 1 :]:
                later.gapped = True
        clocks = [st.clock for st in c.stages.values() if st.clock is not None]
        job_clock = min(clocks) if clocks else None
        self.stages = {}
        for b in job:
            self._sink_columns(b, early)
            old = c.stages.get(b.stage)
            if old is not None and (old.branch.running, old.branch.session, old.branch.dedup) != (
                b.running,
                b.session,
                b.dedup,
            ):
                raise AssertionError(f"the generator changed stage {b.stage}'s kind")
            if old is None and b.dedup:  # ROW_NUMBER: on the job's clock; DISTINCT: none
                clocked = b.dedup == "first" and job_clock is not None
                late = [(0, job_clock)] if clocked and job_clock is not None else []
                self.stages[b.stage] = StageModel(b, job_clock if clocked else None, {}, late)
                continue
            if old is None:
                # A tumbling stage's clock drops an event whose window had closed at the job's
                # clock; a sliding one's, each window that had (the clock itself, per window).
                tumbling = not b.running and not b.slide  # (a session's: its own gap)
                late = [(b.size * 60, job_clock)] if job_clock is not None and tumbling else []
                self.stages[b.stage] = StageModel(
                    b, None if b.running else job_clock, {}, late, early=early and b.windowed
                )
                self._chained_first(self.stages[b.stage], c, job_clock)
                continue
            on = early and b.windowed
            native = (
                fmt == "auto"
                and old.committed
                and (old.branch.aggs, old.branch.size, old.branch.slide) == (b.aggs, b.size, b.slide)
                and old.branch.firsts == b.firsts  # a branch's checkpoint holds all its stages
                and not (on and not old.early)  # turned on: from the rows, whose batch writes every window
            )
            st = StageModel(
                b, old.clock, {}, [], committed=native, reseed=not native, seen=dict(old.seen), early=on
            )
            if old.clock is not None and not b.slide:
                st.late_before = [(old.branch.size * 60, old.clock)]
            self._chained_first(st, c, job_clock)
            carried = evolve(old.branch.aggs, b.aggs)
            size = b.size * 60
            for (start, k), acc in old.windows.items():
                if b.session:  # re-formed as [start, last event + new gap), merged in the first batch
                    end = acc["__end"] - old.branch.size * 60 + size
                    values = {a: acc[carried[a]] if carried.get(a) else None for a in b.aggs}
                    st.windows[(start, k)] = {**values, "__end": end}
                    continue
                if b.slide:  # the new window with the same end
                    new_start = start + old.branch.size * 60 - size
                else:  # the tumbling window that holds the old one's start
                    new_start = start - start % size if size else 0
                target = st.windows.setdefault((new_start, k), {a: None for a in b.aggs})
                for a in b.aggs:
                    src = carried.get(a)
                    if src is not None and acc[src] is not None:
                        target[a] = merge(a, target[a], acc[src])
            self.stages[b.stage] = st
        self.read = c.files
        self.state = "running"
        self.batch()

    @staticmethod
    def _chained_first(st: StageModel, c: Cut, job_clock: int | None) -> None:
        """A window's chained ROW_NUMBER: its keys seen from the snapshot's stage of its name
        (and the old job's late rule for the run), or empty on the job's clock when new."""
        name = st.branch.firsts
        if not name:
            return
        old = c.stages.get(name)
        if old is not None:
            st.seen = dict(old.seen)
            st.firsts_late = [old.clock] if old.clock is not None else []
        else:
            st.seen = {}
            st.firsts_late = [job_clock] if job_clock is not None else []


def evolve(old: tuple[str, ...], new: tuple[str, ...]) -> dict[str, str | None]:
    """Which old aggregate each new one takes its state from (pitstop's documented matching: by
    call, else a gone call at the same place; every state type here is BIGINT)."""
    out: dict[str, str | None] = {}
    used: set[str] = set()
    for i, a in enumerate(new):
        src: str | None = a if a in old else None
        if src is None and i < len(old) and old[i] not in new and STATE_TYPE[old[i]] == STATE_TYPE[a]:
            src = old[i]  # a changed function at the same place, of the same state type
        if src is None or src in used:
            out[a] = None
            continue
        used.add(src)
        out[a] = src
    return out


# -- the generator -------------------------------------------------------------------------------
WINDOW_SINKS = ("w1", "w2", "w3", "f1")  # f1: a File sink (parquet), the others DuckDB tables
RUNNING_SINKS = ("r1", "r2")
DEDUP_SINKS = ("d1", "d2")  # d1: DISTINCT, d2: ROW_NUMBER
SINKS = WINDOW_SINKS + RUNNING_SINKS + DEDUP_SINKS
FILE_SINKS = ("f1",)
PG_SINKS = ("p1", "p2")  # with a PostgreSQL server: p1 a window table (appended), p2 a running aggregate's
APPEND_ONLY = ("f1", "p1")  # no early results into them: a File sink appends; p1 has no unique index


def _new_branch(
    rnd: random.Random, used: set[str], job: Job, keyed: frozenset[str] = frozenset(), pg: bool = False
) -> Branch | None:
    roll = rnd.random()
    running, dedup = roll < 0.25, roll > 0.85
    pool = RUNNING_SINKS if running else DEDUP_SINKS if dedup else WINDOW_SINKS
    if pg and not dedup:
        pool = (*pool, "p2" if running else "p1")
    free = [s for s in pool if s not in {b.sink for b in job}]
    if not free:
        return None
    sink = rnd.choice(free)
    n = 0
    while f"{sink}_s{n}" in used:
        n += 1
    aggs = tuple(rnd.sample(list(FUNCTIONS), rnd.randint(1, 3)))
    where = rnd.choice([None, None, 10, 25])
    if dedup:
        return Branch(sink, f"{sink}_s{n}", 0, (), where, dedup="distinct" if sink == "d1" else "first")
    if running:
        return Branch(sink, f"{sink}_s{n}", 0, aggs, where)
    if rnd.random() < 0.2 and sink not in keyed:  # (a session's rows are appended)
        return Branch(sink, f"{sink}_s{n}", rnd.choice([5, 10, 20]), aggs, where, session=True)
    firsts = f"{sink}_f{n}" if rnd.random() < 0.25 else ""  # each id's first event, then the window
    if rnd.random() < 0.3:
        slide = rnd.choice([10, 15])
        return Branch(sink, f"{sink}_s{n}", slide * rnd.choice([2, 3]), aggs, where, slide, firsts=firsts)
    return Branch(sink, f"{sink}_s{n}", rnd.choice(BASE_SIZES), aggs, where, firsts=firsts)


def _changed(
    rnd: random.Random, job: Job, used: set[str], keyed: frozenset[str] = frozenset(), pg: bool = False
) -> Job:
    """The job with one change (or none: the same SQL again)."""
    change = rnd.choice(["same", "add", "drop", "rename", "filter", "agg+", "agg-", "resize"])
    branches = list(job)
    i = rnd.randrange(len(branches))
    b = branches[i]
    if b.dedup and change in ("agg+", "agg-", "resize"):  # a deduplication has no aggregates
        change = "same"
    if change == "add":
        new = _new_branch(rnd, used, job, keyed, pg)
        if new is not None:
            branches.append(new)
    elif change == "drop" and len(branches) > 1:
        del branches[i]
    elif change == "rename" and b.windowed and rnd.random() < 0.5:
        # the chained ROW_NUMBER: renamed, added or removed
        n = 0
        while f"{b.sink}_f{n}" in used:
            n += 1
        branches[i] = replace(b, firsts="" if b.firsts and rnd.random() < 0.5 else f"{b.sink}_f{n}")
    elif change == "rename":
        n = 0
        while f"{b.sink}_s{n}" in used:
            n += 1
        branches[i] = replace(b, stage=f"{b.sink}_s{n}")
    elif change == "filter":
        branches[i] = replace(b, where=rnd.choice([w for w in (None, 5, 10, 25, 40) if w != b.where]))
    elif change == "agg+":
        missing = [a for a in FUNCTIONS if a not in b.aggs]
        if missing:
            branches[i] = replace(b, aggs=(*b.aggs, rnd.choice(missing)))
    elif change == "agg-" and len(b.aggs) > 1:
        gone = rnd.choice(b.aggs)
        branches[i] = replace(b, aggs=tuple(a for a in b.aggs if a != gone))
    elif change == "resize" and b.session:
        branches[i] = replace(b, size=max(5, b.size + rnd.choice([-5, 5, 10])))
    elif change == "resize" and b.slide:
        branches[i] = replace(b, size=max(b.slide, b.size + b.slide * rnd.choice([-1, 1])))
    elif change == "resize" and 0 < b.size <= 60:
        branches[i] = replace(b, size=b.size * rnd.choice([2, 3]))
    out = tuple(branches)
    used.update(x.stage for x in out)
    used.update(x.firsts for x in out if x.firsts)
    return out


def generate(seed: int, steps: int, pg: bool = False) -> list[Step]:
    """A chain: input, the first job, then ``steps`` steps with input between them (``pg``: with
    PostgreSQL sinks among the others)."""
    rnd = random.Random(seed)
    used: set[str] = set()
    keyed: set[str] = set()  # window sinks an early-results job keyed by window
    twice = False  # a restore without rollback wrote windows again: a key may not fit a table

    def early(job: Job) -> bool:
        """Early results for this job (drawn): TUMBLE and HOP only, into DuckDB tables."""
        windows = [b for b in job if b.windowed]
        fits = (
            windows
            and not any(b.session for b in job)
            and not any(b.sink in APPEND_ONLY for b in windows)
            and (not twice or all(b.sink in keyed for b in windows))
        )
        if fits and rnd.random() < 0.3:
            keyed.update(b.sink for b in windows)
            return True
        return False

    first = _new_branch(rnd, used, (), pg=pg)
    assert first is not None
    job: Job = (first,)
    used.update(x for x in (first.stage, first.firsts) if x)
    chain: list[Step] = [_input(rnd), Start(job, early(job)), _input(rnd)]
    snapshots = 0  # snapshots taken so far (each Update and Snapshot takes one)
    gapped: set[int] = set()
    running = True
    for _ in range(steps):
        roll = rnd.random()
        if not running:  # resumed, or stopped with a snapshot (or dropped) while suspended
            running = True
            if roll < 0.6:
                chain.append(Resume())
                roll = 2.0
            elif roll < 0.8 or snapshots == 0:
                roll = 0.0  # an update
            else:
                roll = 0.8  # a restore from an older snapshot
        if roll < 0.45:
            job = _changed(rnd, job, used, frozenset(keyed), pg)
            chain.append(Update(job, rnd.choice(["auto", "auto", "canonical"]), early(job)))
            snapshots += 1
        elif roll < 0.6:
            chain.append(Snapshot())
            snapshots += 1
        elif roll < 0.67:
            chain.append(Kill(_input(rnd), rnd.randint(0, 4000)))
        elif roll < 0.72:
            chain.append(Serve(_input(rnd)))
        elif roll < 0.85 and snapshots > 0:
            which = rnd.randrange(snapshots)
            rollback = rnd.random() < 0.6 and which not in gapped
            job = _changed(rnd, job, used, frozenset(keyed), pg)
            fmt = rnd.choice(["auto", "canonical"])
            chain.append(Restore(which, job, rollback, fmt, early(job), accept_gap=which in gapped))
            if rollback:
                gapped.update(range(which + 1, snapshots))
            else:
                twice = True
        elif roll <= 1.0:
            chain.append(Suspend())
            running = False
        if rnd.random() < 0.75:  # or the next step right away: a run that reads nothing
            chain.append(_input(rnd))
    if not running:
        chain.append(Resume())
    return chain


def _input(rnd: random.Random) -> Input:
    return Input(
        rnd.randrange(1 << 30),
        rnd.randint(5, 30),
        rnd.choice([10, 30, 60, 120]),
        rnd.choice([0, 0.1, 0.3]),
        rnd.choice([0, 0, 0.2]),
    )


# -- the runner ----------------------------------------------------------------------------------
def mappings(folder: Path, pg_url: str | None) -> str:
    """The source and every sink a chain may write (PostgreSQL's with a server's URL)."""
    out = f"""CREATE MAPPING ev (id BIGINT, k VARCHAR, v BIGINT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE) TYPE File OPTIONS ('path'='{folder}', 'format'='json');
"""
    out += "".join(f"CREATE MAPPING {s} TYPE DuckDB;\n" for s in SINKS if s not in FILE_SINKS)
    out += "".join(
        f"CREATE MAPPING {s} TYPE File OPTIONS ('path'='{folder}-{s}', 'format'='parquet');\n"
        for s in FILE_SINKS
    )
    if pg_url is not None:
        out += "".join(
            f"CREATE MAPPING {s} TYPE Postgres OPTIONS ('dsn'='{pg_url}', 'table'='public.{s}');\n"
            for s in PG_SINKS
        )
    return out


class ChainFailure(AssertionError):
    def __init__(self, step: int, message: str, script: str) -> None:
        super().__init__(f"step {step}: {message}")
        self.step = step
        self.message = message
        self.script = script


class Player:
    """Plays a chain on a pitstop home: statements through an in-process manager
    (``open_manager()``), a ``pitstop run`` process killed with SIGKILL (:class:`Kill`), a
    ``pitstop serve`` process and a PostgreSQL client (:class:`Serve`); input files into
    ``folder``. Checks every sink against the model after every step."""

    def __init__(
        self,
        open_manager: Callable[[], Manager],
        folder: Path,
        home: Path,
        via: str = "process",
        pg_url: str | None = None,
    ) -> None:
        """``via``: where statements go: ``process`` (an in-process manager), ``server`` (one
        ``pitstop serve`` and a psycopg connection for the whole chain) or ``cli`` (a
        ``pitstop run -c`` process per statement, which resumes the job and stops it at exit)."""
        self.open_manager = open_manager
        self.manager: Manager | None = None
        self.via = via
        self.pg_url = pg_url  # a PostgreSQL database for the p1 and p2 sinks
        self.server: subprocess.Popen[str] | None = None
        self.conn: Any = None
        self.folder = folder
        self.home = home
        self.model = Model()
        self.script: list[str] = []
        self.snapshots: list[str] = []

    def sql(self, text: str) -> list[Any]:
        from pitstop.executor import Executor

        self.script.append(text.strip().rstrip(";") + ";")
        if self.via == "server":
            import psycopg

            with psycopg.ClientCursor(self.connection()) as cur:  # the simple protocol, as psql
                cur.execute(text)
            return []
        if self.via == "cli":
            done = subprocess.run(
                [sys.executable, "-m", "pitstop.cli", "--home", str(self.home), "run", "-c", text],
                capture_output=True,
                text=True,
                env=subprocess_env(),
                timeout=600,
            )
            if done.returncode != 0:
                raise AssertionError(f"pitstop run exited {done.returncode}: {done.stderr.strip()}")
            return []
        if self.manager is None:
            self.manager = self.open_manager()
        return [r for _, r in Executor(self.manager).run_script(text)]

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        if self.via == "server":
            cur = self.connection().execute(sql)
            return [d.name for d in cur.description or []], list(cur.fetchall())
        if self.manager is None:
            self.manager = self.open_manager()
        try:
            columns, rows = self.manager.catalog.query(sql)
        finally:
            if self.via == "cli":  # the next statement's process needs the home
                self.close()
        return list(columns), list(rows)

    def connection(self) -> Any:
        """The chain's psycopg connection to its ``pitstop serve`` (started on first use)."""
        import psycopg

        if self.conn is None:
            self.close()
            self.server, port = start_server(self.home)
            self.conn = psycopg.connect(f"postgresql://127.0.0.1:{port}/pitstop", autocommit=True)
        return self.conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.server is not None:
            stop_server(self.server)
            self.server = None
        if self.manager is not None:
            self.manager.close()
            self.manager = None

    def play(self, chain: list[Step]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self.sql(mappings(self.folder, self.pg_url))
            for i, step in enumerate(chain):
                try:
                    self.step(step)
                    self.check()
                except ChainFailure as failure:
                    raise ChainFailure(i, failure.message, self.text()) from None
                except Exception as exc:  # noqa: BLE001 - any failure of a step is the chain's
                    raise ChainFailure(i, f"{type(exc).__name__}: {exc}", self.text()) from exc
        finally:
            self.close()

    def text(self) -> str:
        return "\n".join(self.script)

    def write_input(self, step: Input) -> None:
        events = self.model.arrive(step)
        name = f"f{len(self.model.events):04d}.json"
        tmp = self.folder / f".{name}.tmp"
        tmp.write_text("".join(e.json() + "\n" for e in events))
        os.replace(tmp, self.folder / name)
        self.script.append(f"-- input: {name}, {len(events)} events ({step})")

    def step(self, step: Step) -> None:
        m = self.model
        if isinstance(step, Input):
            self.write_input(step)
            if m.state == "running":
                self.sql("AWAIT JOB c")
                m.batch()
        elif isinstance(step, Start):
            early = f" OPTIONS ('{EARLY}'='200')" if step.early else ""
            self.sql(f"CREATE JOB c{early} AS {job_sql(step.job)}")
            self.sql("AWAIT JOB c")
            m.start(step.job, step.early)
        elif isinstance(step, Update):
            name = f"s{len(self.snapshots)}"
            self.snapshots.append(name)
            self.sql(f"DROP JOB c WITH SNAPSHOT {name}")
            c = m.cut(name)
            self.sql(self._create(name, step.job, step.fmt, False, step.early))
            self.sql("AWAIT JOB c")
            m.restore(c, step.job, rollback=False, fmt=step.fmt, early=step.early)
        elif isinstance(step, Snapshot):
            name = f"s{len(self.snapshots)}"
            self.snapshots.append(name)
            self.sql(f"CREATE SNAPSHOT {name} FOR JOB c")
            m.cut(name)
        elif isinstance(step, Restore):
            c = m.cuts[step.which]
            self.sql("DROP JOB c")
            self.sql(self._create(c.name, step.job, step.fmt, step.rollback, step.early, step.accept_gap))
            self.sql("AWAIT JOB c")
            m.restore(c, step.job, step.rollback, step.fmt, step.early)
        elif isinstance(step, Suspend):
            self.sql("ALTER JOB c SUSPEND")
            m.state = "suspended"
        elif isinstance(step, Resume):
            self.sql("ALTER JOB c RESUME")
            self.sql("AWAIT JOB c")
            m.state = "running"
            m.batch()
        elif isinstance(step, Kill):
            self.kill(step)
        elif isinstance(step, Serve):
            self.serve(step)

    def kill(self, step: Kill) -> None:
        """This process lets go of the home (its jobs stop at a batch boundary); a ``pitstop run``
        process resumes the job, input arrives, and the process is killed with SIGKILL
        ``step.after_ms`` later; this process opens the home again and resumes the job."""
        self.close()
        self.script.append(
            f"-- a pitstop run process resumes the job; SIGKILL {step.after_ms} ms after input"
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "pitstop.cli", "--home", str(self.home), "run", "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
            start_new_session=True,
        )
        try:
            assert proc.stdin is not None
            proc.stdin.write("AWAIT JOB c;\n")  # stdin stays open: the process runs its jobs
            proc.stdin.flush()
            self.write_input(step.input)
            time.sleep(step.after_ms / 1000)  # the kill lands where the process happens to be
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        self.sql("AWAIT JOB c")
        self.model.batch()

    def serve(self, step: Serve) -> None:
        """``pitstop serve`` takes the home over and resumes the job; input arrives, a PostgreSQL
        client awaits the job through it; the server stops on SIGTERM, and this process resumes."""
        import psycopg

        self.close()
        proc, port = start_server(self.home)
        try:
            self.write_input(step.input)
            self.script.append("-- through pitstop serve and psycopg:")
            with psycopg.connect(f"postgresql://127.0.0.1:{port}/pitstop", autocommit=True) as conn:
                self.script.append("AWAIT JOB c;")
                conn.execute("AWAIT JOB c")
        finally:
            stop_server(proc)
        self.model.batch()
        self.sql("AWAIT JOB c")

    def _create(
        self, snapshot: str, job: Job, fmt: str, rollback: bool, early: bool = False, gap: bool = False
    ) -> str:
        options = [f"'restoreFormat'='{fmt}'"] if fmt != "auto" else []
        if rollback:
            options.append("'sinkRollback'='true'")
        if gap:
            options.append("'acceptSinkGap'='true'")
        if early:
            options.append(f"'{EARLY}'='200'")
        opts = f" OPTIONS ({', '.join(options)})" if options else ""
        return f"CREATE JOB c{opts} FROM SNAPSHOT {snapshot} AS {job_sql(job)}"

    def check(self) -> None:
        for sink in self.model.columns:
            expected = self.model.rows(sink)
            got = self.sink_rows(sink)
            want = Counter(self.truth(sink, expected))
            if got != want:
                missing = want - got
                extra = got - want
                raise ChainFailure(
                    -1,
                    f"sink {sink}: {sum(missing.values())} row(s) missing, {sum(extra.values())} unexpected\n"
                    + "".join(f"  missing    {r}\n" for r in sorted(missing, key=str)[:8])
                    + "".join(f"  unexpected {r}\n" for r in sorted(extra, key=str)[:8]),
                    self.text(),
                )

    def sink_rows(self, sink: str) -> Counter[tuple[Any, ...]]:
        cols = self.model.columns[sink]
        if sink in PG_SINKS:
            assert self.pg_url is not None
            import psycopg

            with psycopg.connect(self.pg_url, autocommit=True) as conn:
                have = {
                    r[0]
                    for r in conn.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_name = %s", [sink]
                    ).fetchall()
                }
                if not have:
                    return Counter()
                picked = ", ".join(c if c in have else f"NULL AS {c}" for c in cols)
                rows = conn.execute(f"SELECT {picked} FROM public.{sink}").fetchall()
            return Counter(tuple(_plain(v) for v in r) for r in rows)
        if sink in FILE_SINKS:  # the batches' files, read by DuckDB
            files = sorted(Path(f"{self.folder}-{sink}").glob("part-*.parquet"))
            if not files:
                return Counter()
            con = duckdb.connect()
            try:
                have = {
                    r[0]
                    for r in con.execute(
                        "DESCRIBE SELECT * FROM read_parquet(?, union_by_name=true)",
                        [[str(f) for f in files]],
                    ).fetchall()
                }
                picked = ", ".join(c if c in have else f"NULL AS {c}" for c in cols)
                rows = con.execute(
                    f"SELECT {picked} FROM read_parquet(?, union_by_name=true)", [[str(f) for f in files]]
                ).fetchall()
            finally:
                con.close()
            return Counter(tuple(_plain(v) for v in r) for r in rows)
        try:
            _, rows = self.query(f"SELECT {', '.join(cols)} FROM {sink}")
        except Exception as exc:  # noqa: BLE001 - a table not there yet holds no row
            if "does not exist" in str(exc) or "not found" in str(exc).lower():
                return Counter()
            raise
        return Counter(tuple(_plain(v) for v in r) for r in rows)

    def truth(self, sink: str, rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        """The expected rows, as DuckDB computes them from the model's rows (one per window
        written, with NULL for a column the branch that wrote it does not have)."""
        cols = self.model.columns[sink]
        if not rows:
            return []
        con = duckdb.connect()
        fixed = ["window_start", "window_end", "k", "id", "ts", "early"]
        con.execute(
            "CREATE TABLE t (window_start TIMESTAMP, window_end TIMESTAMP, k VARCHAR, id BIGINT, "
            + "ts TIMESTAMP, early BOOLEAN, "
            + ", ".join(f"{a} {'DOUBLE' if a == 'mean' else 'BIGINT'}" for a in FUNCTIONS)
            + ")"
        )
        con.executemany(
            f"INSERT INTO t VALUES ({', '.join('?' for _ in fixed + list(FUNCTIONS))})",
            [[r.get(c) for c in fixed + list(FUNCTIONS)] for r in rows],
        )
        out = con.execute(f"SELECT {', '.join(cols)} FROM t").fetchall()
        con.close()
        return [tuple(_plain(v) for v in r) for r in out]


def start_server(home: Path) -> tuple[subprocess.Popen[str], int]:
    """``pitstop serve`` on a free loopback port, as its own process group."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pitstop.cli", "--home", str(home), "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "127.0.0.1:" not in line:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(
            f"pitstop serve did not start: {line}{proc.stderr.read() if proc.stderr else ''}"
        )
    return proc, int(line.split("127.0.0.1:")[1].split("/")[0])


def stop_server(proc: subprocess.Popen[str]) -> None:
    """SIGTERM: jobs stop at a batch boundary and the server exits 0."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        code = proc.wait(120)
        if code != 0:
            raise AssertionError(
                f"pitstop serve exited {code} on SIGTERM: {proc.stderr.read() if proc.stderr else ''}"
            )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def subprocess_env() -> dict[str, str]:
    return dict(
        os.environ,
        PITSTOP_TRIGGER_MS="200",
        PITSTOP_SPARK_MASTER="local[2]",
        PITSTOP_SHUFFLE_PARTITIONS="2",
    )


def _plain(v: Any) -> Any:
    if isinstance(v, datetime) and v.tzinfo is not None:
        return v.astimezone(UTC).replace(tzinfo=None)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if hasattr(v, "as_integer_ratio") and not isinstance(v, int | float):
        return int(v) if v == int(v) else float(v)
    return v


# -- shrinking -----------------------------------------------------------------------------------
def shrink(chain: list[Step], fails: Any) -> list[Step]:
    """A smaller chain that still fails (``fails(chain) -> bool``): drop steps, one at a time,
    from the end, keeping each removal that still fails and is still a valid chain."""
    best = list(chain)
    changed = True
    while changed:
        changed = False
        for i in range(len(best) - 1, -1, -1):
            candidate = best[:i] + best[i + 1 :]
            if valid(candidate) and fails(candidate):
                best = candidate
                changed = True
    return best


def valid(chain: list[Step]) -> bool:
    """Whether every step can run where it stands."""
    state, snapshots = "none", 0
    gapped: set[int] = set()
    for s in chain:
        if isinstance(s, Start):
            if state != "none":
                return False
            state = "running"
        elif isinstance(s, Snapshot):
            if state != "running":  # CREATE SNAPSHOT of a suspended job is refused
                return False
            snapshots += 1
        elif isinstance(s, Update):
            if state == "none":
                return False
            snapshots += 1
            state = "running"
        elif isinstance(s, Restore):
            if state == "none" or s.which >= snapshots or (s.which in gapped and not s.accept_gap):
                return False
            if s.rollback and s.accept_gap:
                return False
            if s.rollback:
                gapped.update(range(s.which + 1, snapshots))
            state = "running"
        elif isinstance(s, Suspend):
            if state != "running":
                return False
            state = "suspended"
        elif isinstance(s, Kill | Serve):
            if state != "running":
                return False
        elif isinstance(s, Resume):
            if state != "suspended":
                return False
            state = "running"
    return True
