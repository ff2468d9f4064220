"""A seeded generator of chains."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from chains.model import (
    APPEND_ONLY,
    BASE_SIZES,
    BOUNDS,
    DEDUP_SINKS,
    DELAYS,
    ENRICH_SINKS,
    FUNCTIONS,
    RUNNING_SINKS,
    TYPED_FUNCTIONS,
    WIDER,
    WINDOW_SINKS,
    Branch,
    Job,
)
from chains.steps import (
    RESTORE_CRASHES,
    SNAPSHOT_CRASHES,
    STAGE_WRITTEN,
    UPDATE_CRASHES,
    Analyze,
    Crash,
    Input,
    Kill,
    Restore,
    Resume,
    Serve,
    Snapshot,
    Start,
    Step,
    Suspend,
    Update,
    exports_a_stage,
)

FIXED_PG_AGGS = ("n", "total")


@dataclass
class Extra:
    """The features drawn from a generator of their own (``rnd``), so that a seed whose chain
    draws none of them is the chain it always was: a HAVING on a window or running aggregate (put
    in, changed or taken out at a pit stop), an interval join of ``ev`` and ``cl`` (added,
    dropped, renamed, its bound narrowed or widened at a pit stop), a window over a typed ``v``
    (sink ``t1``; widened at a pit stop), and ev's WATERMARK delay changed at a pit stop.
    ``vtype``: the type ``t1``'s latest branch reads (its table's columns have it: a later branch
    into it reads the same, or a wider one)."""

    rnd: random.Random
    vtype: str | None = None
    delay: int = 5  # ev's WATERMARK delay, minutes

    def redelay(self) -> int:
        """ev's WATERMARK delay for the next job: now and then another."""
        if self.rnd.random() < 0.15:
            self.delay = self.rnd.choice([d for d in DELAYS if d != self.delay])
        return self.delay


def _stage_name(sink: str, used: set[str]) -> str:
    n = 0
    while f"{sink}_s{n}" in used:
        n += 1
    return f"{sink}_s{n}"


def _join_branch(x: Extra, used: set[str]) -> Branch:
    """An interval join's pairs (sink i1), or now and then a window over them (sink i2)."""
    if x.rnd.random() < 0.35:
        aggs = tuple(x.rnd.sample(["n", "total", "hi"], x.rnd.randint(1, 2)))
        return Branch(
            "i2",
            _stage_name("i2", used),
            x.rnd.choice([10, 30]),
            aggs,
            interval=x.rnd.choice(BOUNDS),
            pairs=_pairs_name(used),
        )
    return Branch("i1", _stage_name("i1", used), 0, (), interval=x.rnd.choice(BOUNDS))


def _pairs_name(used: set[str]) -> str:
    n = 0
    while f"i2_j{n}" in used:
        n += 1
    return f"i2_j{n}"


def _typed_branch(x: Extra, used: set[str]) -> Branch:
    rnd = x.rnd
    if x.vtype is None:
        x.vtype = rnd.choice(list(WIDER))
    pool = TYPED_FUNCTIONS[x.vtype]
    aggs = tuple(rnd.sample(pool, rnd.randint(1, 3)))
    where = rnd.choice([None, None, 10, 25])
    return Branch("t1", _stage_name("t1", used), rnd.choice(BASE_SIZES), aggs, where, vtype=x.vtype)


def _new_branch(
    rnd: random.Random,
    used: set[str],
    job: Job,
    keyed: frozenset[str] = frozenset(),
    pg: bool = False,
    kafka: bool = False,
    x: Extra | None = None,
) -> Branch | None:
    regular = _regular_branch(rnd, used, job, keyed, pg, kafka)
    if x is None:
        return regular
    sinks = {b.sink for b in job}
    roll = x.rnd.random()
    if roll < 0.15 and not any(b.interval for b in job):
        return _join_branch(x, used)
    if roll < 0.27 and "t1" not in sinks:
        return _typed_branch(x, used)
    return _with_having(x, regular)


def _with_having(x: Extra, b: Branch | None) -> Branch | None:
    """Now and then a HAVING COUNT(*) >= 2 or 3 on a window or running aggregate."""
    if b is not None and b.aggs and x.rnd.random() < 0.2:
        return replace(b, having=x.rnd.choice([2, 3]))
    return b


def _regular_branch(
    rnd: random.Random,
    used: set[str],
    job: Job,
    keyed: frozenset[str] = frozenset(),
    pg: bool = False,
    kafka: bool = False,
) -> Branch | None:
    roll = rnd.random()
    running, dedup, enrich = roll < 0.25, 0.84 < roll <= 0.92, roll > 0.92
    pool = RUNNING_SINKS if running else DEDUP_SINKS if dedup else ENRICH_SINKS if enrich else WINDOW_SINKS
    if pg and not dedup and not enrich:
        pool = (*pool, "p2" if running else "p1")
    if kafka and not dedup and not running and not enrich:
        pool = (*pool, "k1")
    free = [s for s in pool if s not in {b.sink for b in job}]
    if not free:
        return None
    sink = rnd.choice(free)
    n = 0
    while f"{sink}_s{n}" in used:
        n += 1
    aggs = tuple(rnd.sample(list(FUNCTIONS), rnd.randint(1, 3)))
    if sink == "p1":  # an appended PostgreSQL table gains no column (documented): one set of them
        aggs = FIXED_PG_AGGS
    where = rnd.choice([None, None, 10, 25])
    if enrich:
        return Branch(sink, f"{sink}_s{n}", 0, (), where, enrich=True)
    joined = rnd.random() < 0.2  # by the static table's group
    if dedup:
        return Branch(sink, f"{sink}_s{n}", 0, (), where, dedup="distinct" if sink == "d1" else "first")
    if running:
        return Branch(sink, f"{sink}_s{n}", 0, aggs, where, joined=joined)
    if rnd.random() < 0.2 and sink not in keyed:  # (a session's rows are appended)
        return Branch(sink, f"{sink}_s{n}", rnd.choice([5, 10, 20]), aggs, where, session=True, joined=joined)
    # each id's first event, then the window (a ROW_NUMBER reads the source, not a join)
    firsts = f"{sink}_f{n}" if rnd.random() < 0.25 and not joined else ""
    if rnd.random() < 0.3:
        slide = rnd.choice([10, 15])
        size = slide * rnd.choice([2, 3])
        return Branch(sink, f"{sink}_s{n}", size, aggs, where, slide, firsts=firsts, joined=joined)
    return Branch(sink, f"{sink}_s{n}", rnd.choice(BASE_SIZES), aggs, where, firsts=firsts, joined=joined)


def _changed(
    rnd: random.Random,
    job: Job,
    used: set[str],
    keyed: frozenset[str] = frozenset(),
    pg: bool = False,
    kafka: bool = False,
    x: Extra | None = None,
) -> Job:
    """The job with one change (or none: the same SQL again), and perhaps one drawn from ``x``
    (see :class:`Extra`). An interval join's branch is last, and only ``x`` changes it."""
    change = rnd.choice(["same", "add", "drop", "rename", "filter", "agg+", "agg-", "resize", "join"])
    branches = [b for b in job if b.interval is None]
    joins = [b for b in job if b.interval is not None]
    i = rnd.randrange(len(branches))
    b = branches[i]
    if (b.dedup or b.enrich) and change in ("agg+", "agg-", "resize", "join"):  # no aggregates
        change = "same"
    if b.vtype and change == "join":  # a typed window reads ev, not a join
        change = "same"
    if change == "join" and b.firsts:  # a ROW_NUMBER reads the source, not a join
        change = "same"
    if b.sink == "p1" and change == "agg+":  # refused: an appended PostgreSQL table gains no column
        change = "same"
    if change == "add":
        new = _new_branch(rnd, used, job, keyed, pg, kafka, x)
        if new is not None and new.interval is not None:
            joins.append(new)
        elif new is not None:
            branches.append(new)
    elif change == "drop" and len(branches) > 1:
        del branches[i]
    elif change == "join":  # the stage's input grouped by the static table's g, or no longer
        branches[i] = replace(b, joined=not b.joined)
    elif change == "rename" and b.windowed and not b.joined and not b.vtype and rnd.random() < 0.5:
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
        missing = [a for a in (TYPED_FUNCTIONS[b.vtype] if b.vtype else FUNCTIONS) if a not in b.aggs]
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
    if x is not None:
        joins = _join_changed(x, joins, branches, used)
        grouped = [j for j, t in enumerate(branches) if t.aggs]
        if grouped and x.rnd.random() < 0.2:  # a HAVING put in, changed or taken out
            j = x.rnd.choice(grouped)
            branches[j] = replace(
                branches[j], having=x.rnd.choice([h for h in (0, 2, 3) if h != branches[j].having])
            )
        typed = [j for j, t in enumerate(branches) if t.vtype in WIDER]
        if typed and x.rnd.random() < 0.4:  # v's type widened (INT -> BIGINT, ...)
            t = branches[typed[0]]
            x.vtype = WIDER[t.vtype]
            branches[typed[0]] = replace(t, vtype=x.vtype)
    out = (*branches, *joins)
    used.update(b.stage for b in out)
    used.update(b.firsts for b in out if b.firsts)
    used.update(b.pairs for b in out if b.pairs)
    return out


def _join_changed(x: Extra, joins: list[Branch], others: list[Branch], used: set[str]) -> list[Branch]:
    """The interval join's change at a pit stop, if any: its bound narrowed or widened, renamed,
    dropped; or one added."""
    roll = x.rnd.random()
    if not joins:
        return [_join_branch(x, used)] if roll < 0.15 else []
    (j,) = joins
    if roll < 0.35:
        return [replace(j, interval=x.rnd.choice([b for b in BOUNDS if b != j.interval]))]
    if roll < 0.45 and j.pairs and x.rnd.random() < 0.5:  # the join of a window over its pairs
        return [replace(j, pairs=_pairs_name(used | {j.pairs}))]
    if roll < 0.45:
        return [replace(j, stage=_stage_name(j.sink, used | {j.stage}))]
    if roll < 0.52 and others:
        return []
    if roll < 0.6 and j.size and j.size <= 30:  # the window after the join resized
        return [replace(j, size=j.size * x.rnd.choice([2, 3]))]
    return joins


def generate(seed: int, steps: int, pg: bool = False, kafka: bool = False) -> list[Step]:
    """A chain: input, the first job, then ``steps`` steps with input between them (``pg``: with
    PostgreSQL sinks among the others)."""
    rnd = random.Random(seed)
    x = Extra(random.Random(seed * 6151 + 5))
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
            and not any(b.having or b.pairs for b in job)  # (not drawn with HAVING, a join's window)
        )
        if fits and rnd.random() < 0.3:
            keyed.update(b.sink for b in windows)
            return True
        return False

    first = _with_having(x, _regular_branch(rnd, used, (), pg=pg, kafka=kafka))
    assert first is not None
    job: Job = (first,)
    if x.rnd.random() < 0.12:
        job = (_typed_branch(x, used),)
    if x.rnd.random() < 0.3:
        job = (*job, _join_branch(x, used))
    used.update(b.stage for b in job)
    used.update(b.firsts for b in job if b.firsts)
    used.update(b.pairs for b in job if b.pairs)
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
            job = _changed(rnd, job, used, frozenset(keyed), pg, kafka, x)
            chain.append(Update(job, rnd.choice(["auto", "auto", "canonical"]), early(job), x.redelay()))
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
            job = _changed(rnd, job, used, frozenset(keyed), pg, kafka, x)
            fmt = rnd.choice(["auto", "canonical"])
            chain.append(Restore(which, job, rollback, fmt, early(job), which in gapped, x.redelay()))
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
    return _with_crashes(seed, _with_analyses(seed, chain))


def _with_crashes(seed: int, chain: list[Step]) -> list[Step]:
    """Now and then a pit stop run by a process killed at a step of its protocol
    (:class:`Crash`). Drawn from a generator of its own, as :func:`_with_analyses`."""
    rnd = random.Random(seed * 104_729 + 3)
    out: list[Step] = []
    job: Job = ()  # the job a pit stop snapshots

    def of(points: tuple[str, ...]) -> tuple[str, ...]:
        return points if exports_a_stage(job) else tuple(p for p in points if p != STAGE_WRITTEN)

    for step in chain:
        if isinstance(step, Update) and rnd.random() < 0.15:
            step = Crash(step, rnd.choice(of(UPDATE_CRASHES)))
        elif isinstance(step, Snapshot) and rnd.random() < 0.15:
            step = Crash(step, rnd.choice(of(SNAPSHOT_CRASHES)))
        elif isinstance(step, Restore) and rnd.random() < 0.2:
            points = RESTORE_CRASHES if step.rollback else RESTORE_CRASHES[:1]
            step = Crash(step, rnd.choice(points))
        if isinstance(step, Start | Update | Restore):
            job = step.job
        elif isinstance(step, Crash) and isinstance(step.step, Update | Restore):
            job = step.step.job
        out.append(step)
    return out


def _with_analyses(seed: int, chain: list[Step]) -> list[Step]:
    """Now and then, after a snapshot is taken, the replay of an earlier snapshot's own SQL
    (:class:`Analyze`). Drawn from a generator of its own, so that a seed's other steps are the
    chain it always was."""
    rnd = random.Random(seed * 7919 + 27)
    out: list[Step] = []
    snapshots = 0
    delay, taken = 5, []  # ev's WATERMARK delay now, and that of the job each snapshot was taken of
    for step in chain:
        out.append(step)
        if isinstance(step, Update | Snapshot):
            snapshots += 1
            taken.append(delay)
        if isinstance(step, Update | Restore):
            delay = step.delay
        if isinstance(step, Update | Snapshot) and rnd.random() < 0.2:
            which = rnd.randrange(snapshots)
            # (not across a changed delay: the snapshot's job ran on the old one, a replay of its
            # SQL on the mapping as it is now holds other rows)
            if taken[which] == delay:
                out.append(Analyze(which))
    return out


def _input(rnd: random.Random) -> Input:
    return Input(
        rnd.randrange(1 << 30),
        rnd.randint(5, 30),
        rnd.choice([10, 30, 60, 120]),
        rnd.choice([0, 0.1, 0.3]),
        rnd.choice([0, 0, 0.2]),
    )
