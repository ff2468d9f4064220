"""The model of a job and its pit stops: the documented rules, computed (see the package's
docstring)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chains.steps import Input

EPOCH = datetime(2024, 1, 1)
DELAY = 5 * 60  # the mappings' WATERMARK delay, seconds (ev's may change at a pit stop: DELAYS)
DELAYS = (2, 5, 10)  # minutes: ev's WATERMARK delays a pit stop may change to
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
BASE_SIZES = (10, 30, 60)  # minutes
EARLY = "earlyResultsMillis"

WINDOW_SINKS = ("w1", "w2", "w3", "f1")  # f1: a File sink (parquet), the others DuckDB tables
RUNNING_SINKS = ("r1", "r2")
DEDUP_SINKS = ("d1", "d2")  # d1: DISTINCT, d2: ROW_NUMBER
ENRICH_SINKS = ("j1",)  # a stateless join with the static table ``grp``: every event, with its group
JOIN_SINKS = ("i1",)  # an interval join of ``ev`` and the second stream ``cl``: the pairs, appended
CHAINED_SINKS = ("i2",)  # a TUMBLE window over such a join's pairs (two stages in one INSERT)
TYPED_SINKS = ("t1",)  # a TUMBLE window over ``v`` cast to a type that a pit stop may widen
SINKS = WINDOW_SINKS + RUNNING_SINKS + DEDUP_SINKS + ENRICH_SINKS + JOIN_SINKS + CHAINED_SINKS + TYPED_SINKS
GROUPS = {"a": "x", "b": "x", "c": "y"}  # the static table ``grp (k, g)`` a join reads whole
FILE_SINKS = ("f1",)
PG_SINKS = ("p1", "p2")  # with a PostgreSQL server: p1 a window table (appended), p2 a running aggregate's
KAFKA_SINKS = ("k1",)  # with a Kafka broker: a window topic (appended; never rolled back)
APPEND_ONLY = ("f1", "p1", "k1")  # no early results into them: File and Kafka append; p1 has no unique index
# A typed window's ``v``: each narrow type and the type a pit stop widens it to (README: "state type
# widened ... restored with a cast"); "" is the mapping's BIGINT. A MIN_BY's pair and a COUNT
# (DISTINCT)'s set widen with it.
WIDER = {"INT": "", "FLOAT": "DOUBLE", "DECIMAL(8,0)": "DECIMAL(12,0)"}
_ALL = ("n", "total", "lo", "hi", "mean", "first", "last", "kinds")
TYPED_FUNCTIONS = {
    "INT": _ALL,
    "": _ALL,
    "FLOAT": _ALL,
    "DOUBLE": _ALL,
    "DECIMAL(8,0)": tuple(a for a in _ALL if a != "mean"),  # AVG of a DECIMAL is a DECIMAL, rounded
    "DECIMAL(12,0)": tuple(a for a in _ALL if a != "mean"),
}
# An interval join's bounds, (before, after) minutes: cl's ts BETWEEN ev's ts - before AND + after
BOUNDS = ((0, 10), (0, 30), (10, 10), (10, 30), (0, 60), (30, 60))


def state_type(fn: str, vtype: str = "") -> str:
    """The state type of aggregate ``fn`` over ``v`` of type ``vtype`` ("": BIGINT), as pitstop's
    accumulators have it (a SUM's is Spark's SUM type)."""
    v = vtype or "BIGINT"
    total = {"INT": "BIGINT", "FLOAT": "DOUBLE"}.get(v, v)
    if v.startswith("DECIMAL"):
        p, sc = v[8:-1].split(",")
        total = f"DECIMAL({min(38, int(p) + 10)},{sc})"
    return {
        "n": "BIGINT",
        "total": total,
        "lo": v,
        "hi": v,
        "mean": f"{total}, BIGINT",
        "first": f"PAIR {v}",
        "last": f"PAIR {v}",
        "kinds": f"SET {v}",
    }[fn]


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
    joined: bool = False  # a window or running aggregate of ``ev JOIN grp``: by group, not by k
    enrich: bool = False  # no stage: ``ev JOIN grp``'s rows appended (``stage`` names nothing)
    # An interval join ``ev e JOIN cl c ON e.k = c.k AND c.ts BETWEEN e.ts - before AND e.ts +
    # after`` (minutes), its pairs appended (no aggregates)
    # (with ``size``: a TUMBLE window by ``k`` over the pairs' ``ev`` times, the join a stage named
    # ``pairs`` of the same INSERT)
    interval: tuple[int, int] | None = None
    pairs: str = ""
    vtype: str = ""  # the window reads ``v`` cast to this type (a CTE); "": the mapping's BIGINT
    having: int = 0  # HAVING COUNT(*) >= having (0: none)

    @property
    def running(self) -> bool:
        return self.size == 0 and not self.dedup and not self.enrich and self.interval is None

    @property
    def state_aggs(self) -> tuple[str, ...]:
        """The stage's aggregates: the SELECT's, then the HAVING's that the SELECT does not have
        (pitstop plans an accumulator per call, in the order the calls first appear)."""
        return (*self.aggs, "n") if self.having and "n" not in self.aggs else self.aggs

    def holds(self, acc: Acc) -> bool:
        """Whether the HAVING keeps a group or window (a COUNT(*) that started empty: NULL)."""
        n = acc.get("n")
        return not self.having or (n is not None and n >= self.having)

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
        having = f" HAVING COUNT(*) >= {self.having}" if self.having else ""
        if self.interval is not None:
            before, after = self.interval
            low = f"e.ts - INTERVAL '{before}' MINUTE" if before else "e.ts"
            high = f"e.ts + INTERVAL '{after}' MINUTE"
            if self.size:
                source = f"pairs_{self.sink}"
                on = f"e.k = c.k AND c.ts BETWEEN {low} AND {high}"
                join = f"SELECT /*+ STAGE({self.pairs}) */ e.id, e.k, e.v, e.ts FROM ev e JOIN cl c ON {on}"
                tvf = f"TUMBLE(TABLE {source}, DESCRIPTOR(ts), INTERVAL '{self.size}' MINUTE)"
                return (
                    f"WITH {source} AS ({join}) INSERT INTO {self.sink} SELECT {hint} window_start, "
                    f"window_end, k, {cols} FROM TABLE({tvf}) GROUP BY window_start, window_end, k{having}"
                )
            return (
                f"INSERT INTO {self.sink} SELECT {hint} e.id, e.k, e.ts, c.id AS cid, c.ts AS cts "
                f"FROM ev e JOIN cl c ON e.k = c.k AND c.ts BETWEEN {low} AND {high}"
            )
        if self.enrich:
            where = f" WHERE e.v >= {self.where}" if self.where is not None else ""
            return (
                f"INSERT INTO {self.sink} SELECT e.id, e.k, e.v, g.g FROM ev e JOIN grp g ON e.k = g.k{where}"
            )
        if self.dedup == "distinct":
            return f"INSERT INTO {self.sink} SELECT {hint} DISTINCT id, k FROM ev{where}"
        if self.dedup == "first":
            rn = "ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts) AS rn"
            numbered = f"SELECT {hint} id, k, ts, {rn} FROM ev{where}"
            return f"INSERT INTO {self.sink} SELECT id, k, ts FROM ({numbered}) WHERE rn = 1"
        source, cte = "ev", ""
        if self.vtype:  # v as another type, through a stateless projection
            source = f"typed_{self.sink}"
            cte = f"WITH {source} AS (SELECT id, k, CAST(v AS {self.vtype}) AS v, ts FROM ev) "
        if self.joined:  # each event's group from the static table, read whole every micro-batch
            source = f"grouped_{self.sink}"
            cte = f"WITH {source} AS (SELECT e.id, g.g AS k, e.v, e.ts FROM ev e JOIN grp g ON e.k = g.k) "
        if self.running:
            body = f"SELECT {hint} k, {cols} FROM {source}{where} GROUP BY k{having}"
            return f"{cte}INSERT INTO {self.sink} {body}"
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
            f"FROM TABLE({tvf}){where} GROUP BY window_start, window_end, k{having}"
        )

    @property
    def key_columns(self) -> list[str]:
        if self.interval is not None and not self.size:
            return ["id", "k", "ts", "cid", "cts"]
        if self.enrich:
            return ["id", "k", "v", "g"]
        if self.dedup:
            return ["id", "k", "ts"] if self.dedup == "first" else ["id", "k"]
        return ["k"] if self.running else ["window_start", "window_end", "k"]


Job = tuple[Branch, ...]


def job_sql(job: Job) -> str:
    return "BEGIN\n  " + ";\n  ".join(b.sql() for b in job) + ";\nEND"


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
    # A chained ROW_NUMBER's own clock: its query's watermark, which it passes on to the window.
    # Where the ROW_NUMBER is new at a restore it starts on the job's clock, and the window's own
    # (restored) clock may be ahead of it: the new stage is late by the job's clock only.
    firsts_clock: int | None = None
    # An interval join: the rows each side holds (``ev``'s, ``cl``'s), the greatest event time each
    # side's watermark has seen, and Spark's watermark (the lesser side's, less the delay; ``clock``
    # is it or, after a restore, the job's clock if that is later)
    left: list[Event] = field(default_factory=list)
    right: list[Event] = field(default_factory=list)
    highest: dict[str, int] = field(default_factory=dict)
    wm: int | None = None
    joins: bool = False  # the join of a window over an interval join's pairs (``branch.pairs``)
    delay: int = DELAY  # ev's WATERMARK delay, seconds, as the stage's job was created with

    def copy(self) -> StageModel:
        return StageModel(
            self.branch,
            self.clock,
            {w: dict(a) for w, a in self.windows.items()},
            [],
            self.committed,
            seen=dict(self.seen),
            early=self.early,
            firsts_clock=self.firsts_clock,
            left=list(self.left),
            right=list(self.right),
            highest=dict(self.highest),
            wm=self.wm,
            joins=self.joins,
            delay=self.delay,
        )


@dataclass
class Cut:
    name: str
    stages: dict[str, StageModel]
    files: int  # files read
    appended: dict[str, list[dict[str, Any]]]  # each append sink's rows at the cut
    keyed: dict[str, dict[tuple[Any, ...], dict[str, Any]]]  # each keyed sink's rows at the cut
    gapped: bool = False
    late: dict[str, int] = field(default_factory=dict)  # the job's late rows per stage at the cut
    others: int | None = None  # files of the second stream ``cl`` read (None: the job read no cl)


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
        self.others: list[list[Event]] = []  # the second stream's (``cl``), per file
        self.read_others = 0  # files of ``cl`` read by the running job
        self.next_id = 0
        self.next_cid = 0
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
        self.delay = DELAY  # ev's WATERMARK delay now, seconds
        # Rows each stage dropped as late (pitstop.late_rows): the job's runs' and, restored, those
        # of the job it was restored from up to the snapshot's cut (see :meth:`restore`).
        self.late: dict[str, int] = {}

    def _dropped(self, stage: str, rows: int = 1) -> None:
        if rows:
            self.late[stage] = self.late.get(stage, 0) + rows

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
        self.others.append(self._arrive_other(step, out))
        return out

    def _arrive_other(self, step: Input, events: list[Event]) -> list[Event]:
        """The second stream's file that comes with ``step``'s (and is read before it): rows near
        the events' times (some late), and one at or after the latest event time so far, so that
        the second stream's watermark never lags ``ev``'s (then a join's watermark, the lesser of
        the two, is ``ev``'s however the two files fall into micro-batches and restarts). Drawn from
        a generator of its own: ``ev``'s events are what they always were."""
        rnd = random.Random(f"cl{step.seed}")
        out = []
        for _ in range(rnd.randint(1, max(1, step.n // 2))):
            base = rnd.choice(events).ts if events and rnd.random() < 0.8 else self.frontier
            ts = max(0, base + rnd.randint(-40, 70) * 60)
            out.append(Event(self.next_cid, rnd.choice(KEYS), rnd.randint(1, 50), ts))
            self.next_cid += 1
        # (ev's greatest delay less cl's, or more, after ev's latest time: ev's watermark is the lesser)
        last = self.frontier + rnd.randint(max(DELAYS) - DELAY // 60, 15) * 60
        out.append(Event(self.next_cid, rnd.choice(KEYS), rnd.randint(1, 50), last))
        self.next_cid += 1
        return out

    # one micro-batch per query: every file not read yet (a query runs one only when it has input:
    # new files, or the seeds of a stage restored from the rows)
    def batch(self, ev: bool = True, cl: bool = True) -> None:
        """One micro-batch of each query that has input: the files of ``ev`` and of ``cl`` not
        read yet (of the one or the other alone: the player awaits the job between the two)."""
        pending = [e for f in self.events[self.read :] for e in f] if ev else []
        others = [e for f in self.others[self.read_others :] for e in f] if cl else []
        if ev:
            self.read = len(self.events)
        if cl:
            self.read_others = len(self.others)
        fed: dict[str, tuple[list[Event], int | None]] = {}  # a chained window's pairs, its clock
        for st in self.stages.values():
            if st.branch.interval is not None and (st.joins or not st.branch.size):
                if pending or others or st.reseed:
                    pairs = self._join_batch(st, pending, others)
                    if st.joins:
                        fed[st.branch.stage] = (pairs, self.output_clock(st))
        for st in self.stages.values():
            if st.branch.interval is None:
                if pending or st.reseed:
                    self._stage_batch(st, pending)
            elif st.branch.size and not st.joins and (st.branch.stage in fed or st.reseed):
                pairs, clock = fed.get(st.branch.stage, ([], None))
                self._stage_batch(st, pairs, clock)

    @staticmethod
    def output_clock(st: StageModel) -> int | None:
        """The clock an interval join passes on to the stage after it (README: it lags the input
        watermark by the join's bound; Spark's inclusive bounds, one ms less: one second here,
        where every time is whole seconds)."""
        assert st.branch.interval is not None
        if st.clock is None:
            return None
        return st.clock - max(st.branch.interval) * 60 - 1

    def _join_batch(self, st: StageModel, left: list[Event], right: list[Event]) -> list[Event]:
        """An interval join (README "Joins"): a row at or below the clock is late (dropped and
        counted); each other row is paired with every row of the other side that the stage holds
        and with the batch's own rows of the other side, then held. The watermark is the lesser of
        the two sides' (greatest time less the delay; none until both have rows); a row goes once
        it can pair with no row still to come: ``ev``'s once its time + after is below the
        watermark, ``cl``'s once its time + before is (Spark's inclusive bounds, one ms less)."""
        b = st.branch
        assert b.interval is not None
        before, after = (m * 60 for m in b.interval)
        st.committed = True
        st.reseed = False
        kept_l = [e for e in left if st.clock is None or e.ts > st.clock]
        kept_r = [c for c in right if st.clock is None or c.ts > st.clock]
        name = b.pairs if st.joins else b.stage
        self._dropped(name, len(left) - len(kept_l) + len(right) - len(kept_r))
        out: list[Event] = []

        def pair(e: Event, c: Event) -> None:
            if e.k == c.k and e.ts - before <= c.ts <= e.ts + after and st.joins:
                out.append(e)  # the window after it reads the ev side's columns
            elif e.k == c.k and e.ts - before <= c.ts <= e.ts + after:
                self.sinks[b.sink].append(
                    {
                        "id": e.id,
                        "k": e.k,
                        "ts": EPOCH + timedelta(seconds=e.ts),
                        "cid": c.id,
                        "cts": EPOCH + timedelta(seconds=c.ts),
                    }
                )

        for e in kept_l:
            for c in st.right + kept_r:
                pair(e, c)
        for c in kept_r:
            for e in st.left:
                pair(e, c)
        st.left += kept_l
        st.right += kept_r
        for side, rows in (("ev", kept_l), ("cl", kept_r)):
            if rows:
                st.highest[side] = max(
                    [*(e.ts for e in rows), *([st.highest[side]] if side in st.highest else [])]
                )
        if len(st.highest) == 2:
            w = min(st.highest["ev"] - st.delay, st.highest["cl"] - DELAY)
            st.wm = w if st.wm is None else max(st.wm, w)
        if st.wm is not None:
            wm = st.wm
            st.clock = wm if st.clock is None else max(st.clock, wm)
            st.left = [e for e in st.left if e.ts + after >= wm]
            st.right = [c for c in st.right if c.ts + before >= wm]
        return out

    def _stage_batch(self, st: StageModel, events: list[Event], fed: int | None = None) -> None:
        """A stage's micro-batch of ``events`` (a window after an interval join: the pairs, and
        ``fed`` the clock the join passes on, which is the window's)."""
        b = st.branch
        st.committed = True
        if b.enrich:  # stateless: each event once, with its group
            for e in events:
                if b.where is None or e.v >= b.where:
                    self.sinks[b.sink].append({"id": e.id, "k": e.k, "v": e.v, "g": GROUPS[e.k]})
            return
        if b.joined:  # grouped by the static table's g
            events = [replace(e, k=GROUPS[e.k]) for e in events]
        clocked = events  # what sets the clock: the rows the branch's first stage reads
        if b.firsts:  # the chained ROW_NUMBER first: late at or below the clock, then each id once
            kept = []
            for e in events:
                late = st.firsts_clock is not None and e.ts <= st.firsts_clock
                if late or any(e.ts <= wm for wm in st.firsts_late):
                    self._dropped(b.firsts)
                    continue
                if e.id not in st.seen:
                    st.seen[e.id] = e.ts + st.delay
                    kept.append(e)
            clocked = [e for e in events if not any(e.ts <= wm for wm in st.firsts_late)]
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
                self._dropped(b.stage)  # counted once, whatever the new rule says too
                continue  # the old job would have dropped it: its old window had closed
            else:
                # Late per window: one whose end the clock had passed before this batch (a HOP
                # row is counted once per window it misses).
                every = b.windows_of(e.ts)
                starts = [w for w in every if st.clock is None or w + size > st.clock]
                self._dropped(b.stage, len(every) - len(starts))
            for start in starts:
                acc = st.windows.setdefault((start, e.k), {a: None for a in b.state_aggs})
                for a in b.state_aggs:
                    acc[a] = merge(a, acc[a], contribution(a, e))
                touched.add((start, e.k))
        if b.running:
            for key in sorted(touched):
                acc = st.windows[key]
                if not b.holds(acc):  # a group HAVING no longer keeps is deleted
                    self.keyed[b.sink].pop((key[1],), None)
                    continue
                row = {"k": key[1], **{a: finish(a, acc[a]) for a in b.aggs}}
                self.keyed[b.sink][(key[1],)] = row  # the whole row: other columns NULL
            return
        if st.early:  # each window the batch changed: its row as it is now (open: early)
            for start, k in sorted(touched):
                row = self._window_row(b, start, k, st.windows[(start, k)])
                key = (row["window_start"], row["window_end"], k)
                if b.holds(st.windows[(start, k)]):
                    self.keyed[b.sink][key] = {**row, "early": True}
                else:
                    self.keyed[b.sink].pop(key, None)
        if b.interval is not None:
            if fed is not None:
                st.clock = fed if st.clock is None else max(st.clock, fed)
        elif clocked:
            top = max(e.ts for e in clocked) - st.delay
            st.clock = top if st.clock is None else max(st.clock, top)
            if b.firsts:
                st.firsts_clock = top if st.firsts_clock is None else max(st.firsts_clock, top)
        if b.firsts and st.firsts_clock is not None:  # its keys expire by its own clock
            st.seen = {k: x for k, x in st.seen.items() if x is None or x > st.firsts_clock}
        self._emit(st)

    def _dedup_batch(self, st: StageModel, passed: list[Event]) -> None:
        """Deduplication by ``id``: an event whose id was seen (and, for ROW_NUMBER, has not
        expired: first event + delay at or below the clock) is dropped; ROW_NUMBER also drops
        an event at or below the clock (late: Spark's deduplication drops a row whose time is at
        or below the watermark) or, in the run after a restore, at or below the snapshot's (what
        the old job would have dropped; a stage new at the restore: the job's clock)."""
        b = st.branch
        st.reseed = False
        first = b.dedup == "first"
        for e in passed:
            if first and (
                st.clock is not None and e.ts <= st.clock or any(e.ts <= wm for _, wm in st.late_before)
            ):
                self._dropped(b.stage)  # late before it is a duplicate: Spark drops it as late first
                continue
            if e.id in st.seen:
                continue
            st.seen[e.id] = e.ts + st.delay if first else None
            row = {"id": e.id, "k": e.k}
            if first:
                row["ts"] = EPOCH + timedelta(seconds=e.ts)
            self.sinks[b.sink].append(row)
        if first and passed:
            top = max(e.ts for e in passed) - st.delay
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
            if any(e.ts + g <= wm for g, wm in st.late_before) or (
                st.clock is not None and e.ts + gap <= st.clock
            ):
                self._dropped(b.stage)
                continue
            new.setdefault(e.k, []).append((e.ts, e.ts + gap, {a: contribution(a, e) for a in b.state_aggs}))
            keys.add(e.k)
        for k in keys:
            spans = [(start, acc["__end"], acc) for (start, kk), acc in st.windows.items() if kk == k]
            spans += new.get(k, [])
            for start, _, _ in spans:
                st.windows.pop((start, k), None)
            merged: list[list[Any]] = []
            for start, end, acc in sorted(spans, key=lambda x: (x[0], x[1])):
                values = {a: acc.get(a) for a in b.state_aggs}
                if merged and start <= merged[-1][1]:
                    last = merged[-1]
                    last[1] = max(last[1], end)
                    for a in b.state_aggs:
                        if values[a] is not None:
                            last[2][a] = merge(a, last[2][a], values[a])
                else:
                    merged.append([start, end, dict(values)])
            for start, end, acc in merged:
                st.windows[(start, k)] = {**acc, "__end": end}
        if passed:
            top = max(e.ts for e in passed) - st.delay
            st.clock = top if st.clock is None else max(st.clock, top)
        for (start, k), acc in sorted(st.windows.items()):
            if st.clock is not None and acc["__end"] <= st.clock and not b.holds(acc):
                del st.windows[(start, k)]
            elif st.clock is not None and acc["__end"] <= st.clock:
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
            **{a: finish(a, acc[a]) for a in b.aggs},
        }

    def _emit(self, st: StageModel) -> None:
        """Windows the clock has passed: written once (appended, or replacing the window's early
        row in a keyed table), or, with early results, already written; their state goes."""
        b = st.branch
        size = b.size * 60
        for (start, k), acc in sorted(st.windows.items()):
            if st.clock is not None and start + size <= st.clock:
                row = self._window_row(b, start, k, acc)
                if not b.holds(acc):  # HAVING does not keep it: no row (an early one goes)
                    if b.sink in self.keyed:
                        self.keyed[b.sink].pop((row["window_start"], row["window_end"], k), None)
                elif b.sink in self.keyed:
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
        self.stages = {}
        for b in job:
            if b.pairs:
                self.stages[b.pairs] = StageModel(b, None, joins=True, delay=self.delay)
            self.stages[b.stage] = StageModel(b, None, early=early and b.windowed, delay=self.delay)
        self.late = {}
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
                    first, st.firsts_clock, seen=dict(st.seen), committed=st.committed
                )
                # A snapshot's clock of a stage in a chain: at least the one before it passes on.
                if st.firsts_clock is not None:
                    window = stages[st.branch.stage]
                    window.clock = (
                        st.firsts_clock if window.clock is None else max(window.clock, st.firsts_clock)
                    )
        c = Cut(
            name,
            stages,
            self.read,
            {s: [dict(r) for r in rows] for s, rows in self.sinks.items()},
            {s: {k: dict(r) for k, r in rows.items()} for s, rows in self.keyed.items()},
            late=dict(self.late),
            others=self.read_others if any(st.branch.interval for st in self.stages.values()) else None,
        )
        self.cuts.append(c)
        return c

    def restore(self, c: Cut, job: Job, rollback: bool, fmt: str = "auto", early: bool = False) -> None:
        if rollback:
            for sink in self.sinks:
                if sink not in KAFKA_SINKS:  # a topic's records cannot be deleted
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
        # (of a branch's first stage: a window after an interval join runs on what it passes on)
        after_join = [st for st in c.stages.values() if st.branch.pairs and not st.joins]
        clocks = [st.clock for st in c.stages.values() if st.clock is not None and st not in after_join]
        job_clock = min(clocks) if clocks else None
        self.stages = {}
        for b in job:
            self._sink_columns(b, early)
            old = c.stages.get(b.stage)
            if old is not None and (
                old.branch.running,
                old.branch.session,
                old.branch.dedup,
                old.branch.interval is None,
            ) != (b.running, b.session, b.dedup, b.interval is None):
                raise AssertionError(f"the generator changed stage {b.stage}'s kind")
            if b.enrich:  # no state
                self.stages[b.stage] = StageModel(b, None)
                continue
            if b.interval is not None and not b.size:
                self.stages[b.stage] = self._restored_join(b, old, fmt, job_clock, self.delay)
                continue
            if b.interval is not None:  # a window over a join's pairs: the join first
                old_join = c.stages.get(b.pairs)
                if old_join is not None and not old_join.joins:
                    raise AssertionError(f"the generator changed stage {b.pairs}'s kind")
                self.stages[b.pairs] = self._restored_join(b, old_join, fmt, job_clock, self.delay)
                self.stages[b.pairs].joins = True
            if old is None and b.dedup:  # ROW_NUMBER: on the job's clock; DISTINCT: none
                clocked = b.dedup == "first" and job_clock is not None
                late = [(0, job_clock)] if clocked and job_clock is not None else []
                self.stages[b.stage] = StageModel(b, job_clock if clocked else None, {}, late)
                continue
            if old is None:
                # A tumbling stage's clock drops an event whose window had closed at the job's
                # clock; a sliding one's, each window that had (the clock itself, per window).
                tumbling = not b.running and not b.slide  # (a session's: its own gap)
                clock = job_clock
                if b.pairs and job_clock is not None:  # what the join passes on of the job's clock
                    clock = job_clock - max(b.interval or (0,)) * 60 - 1
                late = [(b.size * 60, clock)] if clock is not None and tumbling else []
                self.stages[b.stage] = StageModel(
                    b, None if b.running else clock, {}, late, early=early and b.windowed
                )
                self._chained_first(self.stages[b.stage], c, job_clock)
                continue
            on = early and b.windowed
            native = (
                fmt == "auto"
                and old.committed
                and (old.branch.state_aggs, old.branch.size, old.branch.slide, old.branch.vtype)
                == (b.state_aggs, b.size, b.slide, b.vtype)
                and old.branch.firsts == b.firsts  # a branch's checkpoint holds all its stages
                and old.branch.pairs == b.pairs
                and (not b.pairs or self.stages[b.pairs].committed)
                and not (on and not old.early)  # turned on: from the rows, whose batch writes every window
            )
            st = StageModel(
                b, old.clock, {}, [], committed=native, reseed=not native, seen=dict(old.seen), early=on
            )
            if old.clock is not None and not b.slide:
                st.late_before = [(old.branch.size * 60, old.clock)]
            if b.pairs and not native:  # a branch's stages go on from the native copy together
                self.stages[b.pairs] = self._restored_join(
                    b, c.stages.get(b.pairs), "canonical", job_clock, self.delay
                )
                self.stages[b.pairs].joins = True
            self._chained_first(st, c, job_clock)
            carried = evolve(old.branch.state_aggs, b.state_aggs, old.branch.vtype, b.vtype)
            size = b.size * 60
            for (start, k), acc in old.windows.items():
                if b.session:  # re-formed as [start, last event + new gap), merged in the first batch
                    end = acc["__end"] - old.branch.size * 60 + size
                    values = {a: acc[carried[a]] if carried.get(a) else None for a in b.state_aggs}
                    st.windows[(start, k)] = {**values, "__end": end}
                    continue
                if b.slide:  # the new window with the same end
                    new_start = start + old.branch.size * 60 - size
                else:  # the tumbling window that holds the old one's start
                    new_start = start - start % size if size else 0
                target = st.windows.setdefault((new_start, k), {a: None for a in b.state_aggs})
                for a in b.state_aggs:
                    src = carried.get(a)
                    if src is not None and acc[src] is not None:
                        target[a] = merge(a, target[a], acc[src])
            self.stages[b.stage] = st
        for st in self.stages.values():  # ev's WATERMARK now: the delay holds from the cut on
            st.delay = self.delay
        # The restored job's late rows: those of the job the snapshot was taken of, up to its cut
        # (README "Late rows"; the catalog's lineage): what was counted after the cut is the old
        # job's alone, whichever snapshot it is and with or without sinkRollback, since the new
        # job reads that input again and counts it itself, under its own stages' names.
        self.late = dict(c.late)
        self.read = c.files
        # A source the snapshot's job did not read is read from its start (EXPLAIN's source row).
        self.read_others = c.others or 0
        self.state = "running"
        self.batch()

    @staticmethod
    def _restored_join(
        b: Branch, old: StageModel | None, fmt: str, job_clock: int | None, delay: int
    ) -> StageModel:
        """An interval join at a restore: new, empty on the job's clock; restored, its held rows
        and its clock. From Spark's state files (same bound and delays) its watermark goes on;
        from the rows, the seeds go through the watermark again with the batch's input, under
        ``delay`` (README: rows restored are never paired with each other; the new bound holds
        from the cut on)."""
        if old is None:
            return StageModel(b, job_clock)
        native = fmt == "auto" and old.committed and old.branch.interval == b.interval and old.delay == delay
        st = StageModel(
            b, old.clock, committed=native, reseed=not native, left=list(old.left), right=list(old.right)
        )
        if native:
            st.highest, st.wm = dict(old.highest), old.wm
        else:
            for side, rows in (("ev", st.left), ("cl", st.right)):
                if rows:
                    st.highest[side] = max(e.ts for e in rows)
        return st

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
            st.firsts_clock = old.clock
        else:
            st.seen = {}
            st.firsts_late = [job_clock] if job_clock is not None else []
            st.firsts_clock = job_clock


def evolve(
    old: tuple[str, ...], new: tuple[str, ...], old_vtype: str = "", new_vtype: str = ""
) -> dict[str, str | None]:
    """Which old aggregate each new one takes its state from (pitstop's documented matching: by
    call, its state widened with a cast where ``v``'s type was; else a gone call at the same place
    whose state type is the same)."""
    out: dict[str, str | None] = {}
    used: set[str] = set()
    for i, a in enumerate(new):
        src: str | None = a if a in old else None
        same = i < len(old) and state_type(old[i], old_vtype) == state_type(a, new_vtype)
        if src is None and i < len(old) and old[i] not in new and same:
            src = old[i]  # a changed function at the same place, of the same state type
        if src is None or src in used:
            out[a] = None
            continue
        used.add(src)
        out[a] = src
    return out
