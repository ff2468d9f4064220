"""Update chains (issue 23): a model of a job and its pit stops, a seeded generator of chains, a
runner that plays a chain on real Spark and real DuckDB files and checks every sink against the
model after every step, and a shrinker that makes a failing chain small enough to keep as a test.

The job reads one File mapping ``ev (id, k, v, ts)`` with a 5-minute watermark and writes one
DuckDB table per branch; each branch is a TUMBLE window by ``k`` with some of ``COUNT(*)``,
``SUM(v)``, ``MIN(v)``, ``MAX(v)`` and perhaps a filter ``v >= x`` (and the other kinds
``model.Branch`` lists: HOP, SESSION, running aggregates, deduplications, static joins, a
``HAVING``, a window over ``v`` cast to a narrower type that a pit stop widens, and an interval
join of ``ev`` with a second File mapping ``cl`` whose pairs are appended; its bound narrowed or
widened at a pit stop). ``ev``'s WATERMARK delay may change at a pit stop (CREATE OR REPLACE
MAPPING between the DROP and the CREATE). A chain is a list of steps:
input arriving (one file, some of it out of order and late), the first ``CREATE JOB``, a pit stop
(``DROP JOB ... WITH SNAPSHOT``, then ``CREATE JOB ... FROM SNAPSHOT`` with a changed job: a branch
added, dropped or renamed, a filter changed, an aggregate added or dropped, a window resized by k;
``restoreFormat`` auto or canonical), ``CREATE SNAPSHOT`` while it runs, a restore from an older
snapshot with or without ``sinkRollback``, and ``ALTER JOB SUSPEND`` / ``RESUME``; a pit stop now and then
run by a process killed with SIGKILL at a step of its protocol (the crash matrix's points), which
the next process finishes.

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
  written after the cut; without it those rows stay and are written again;
- an interval join (README "Joins"): a row at or below its clock is late; every other row pairs
  with the rows the other side holds and with the batch's own; its watermark is the lesser
  side's, and a row goes once it can pair with nothing still to come (README: Spark's rule). Each
  input writes ``cl``'s file first (the player awaits the job between the two), and ``cl``'s
  latest row leads ``ev``'s by ``ev``'s greatest delay, so that ``ev``'s watermark is the lesser
  whatever micro-batches and restarts the files fall in. Restored, its held rows are never paired
  with each other and the new bound holds from the cut on (rows let go under a narrower old bound
  miss their pairs); a join new where the snapshot's job read no ``cl`` reads ``cl`` from its
  start, on the job's clock;
- a HAVING's ``COUNT(*)`` is an aggregate of its own where the SELECT has none (added at a pit
  stop: empty for the windows and groups in flight); a widened ``v`` keeps each aggregate's state;
- late rows (README "Late rows"): each event a stage drops by the rules above is counted under the
  stage's name, once (a HOP event once per window it misses; a ROW_NUMBER's late rule is "at or
  below the clock", as Spark's deduplication drops); a restored job's counts are the snapshot's
  job's at its cut (stages dropped since included) plus its own: what the old job counted after
  the cut is not the new job's, whichever snapshot it is and with or without ``sinkRollback``.

The truth for each sink is computed by DuckDB from the events the model kept per window; the
late rows per stage are compared with ``pitstop.late_rows`` as they are.
"""

from __future__ import annotations

from chains.generate import generate
from chains.model import (
    DELAY,
    EPOCH,
    FUNCTIONS,
    Branch,
    Cut,
    Event,
    Job,
    Model,
    StageModel,
    evolve,
    job_sql,
)
from chains.player import ChainFailure, Player, mappings, start_server, stop_server
from chains.steps import (
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
    shrink,
    valid,
)

__all__ = [
    "DELAY",
    "Analyze",
    "EPOCH",
    "FUNCTIONS",
    "Branch",
    "ChainFailure",
    "Crash",
    "Cut",
    "Event",
    "Input",
    "Job",
    "Kill",
    "Model",
    "Player",
    "Restore",
    "Resume",
    "Serve",
    "Snapshot",
    "StageModel",
    "Start",
    "Step",
    "Suspend",
    "Update",
    "evolve",
    "generate",
    "job_sql",
    "mappings",
    "shrink",
    "start_server",
    "stop_server",
    "valid",
]
