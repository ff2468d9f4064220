"""Early results for windows: ``CREATE JOB j OPTIONS ('earlyResultsMillis'='5000') AS ...``
(Hazelcast's "enable early results for a window").

A window branch with early results runs in Spark's **update** output mode: each micro-batch hands
the sink the windows its input changed (checked on pyspark 4.3.0: a batch with an event for one
key of an open window hands over that window's row only; once the watermark passes a window's
end Spark drops its state and hands it over no more). The sink replaces rows by
``(window_start, window_end, keys...)`` as the SELECT names them, and writes one more column,
:data:`EARLY`: true while the window is open (the row is partial and may change), false once
the watermark has passed the window's end (the row is final; it never changes again). A window
whose last change came before it closed is marked final by the batch whose watermark closes it.
The final row holds the same values as without early results.

Micro-batches of such a branch start at most every ``earlyResultsMillis`` of processing time
(the branch's trigger is the larger of the job's trigger interval and the option), so early rows
change at most that often; Spark cannot emit more rarely than it runs a batch, nor a window's row
without a batch.

Only TUMBLE and HOP have early results: Spark refuses update mode for session windows
(``STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION``), and a session's bounds move as it grows, so
its rows could not be replaced by them. The sink must replace rows by key (TYPE DuckDB or TYPE
Postgres); a File or Kafka sink only appends and is refused.

Across an update (``DROP JOB ... WITH SNAPSHOT``, then ``CREATE JOB ... FROM SNAPSHOT`` with the
option added or removed) the windows' state is kept:

- turned **off**: the restored job appends final rows again, into a table that has a primary key
  on the window columns (one an early-results job wrote), so the sink replaces the early rows of
  the windows in flight at the cut by their final rows (:func:`window_keys`). Spark goes on from
  its own state files across the change of output mode (checked), so both restore formats work;
- turned **on**: restored from the snapshot's rows only. Update mode hands over a window only when
  a batch changes it; from Spark's own state files a window in flight at the cut that gets no new
  event would never be written, while the rows' first batch changes (and writes) every one of
  them. An existing table written without early results gets the primary key and the column
  (false in the rows written before: they were final).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pitstop.catalog.rows import Mapping
from pitstop.connectors import registry
from pitstop.errors import PlanError
from pitstop.plan.model import EARLY, Branch, JobPlan, window_keys
from pitstop.stages import registry as kinds

OPTION = "earlyResultsMillis"
"""The column an early-results sink table has beside the SELECT's: true while the window is open."""


def early_millis(options: dict[str, str]) -> int:
    """The option's value in milliseconds (0: no early results); PlanError for anything else."""
    text = options.get(OPTION)
    if text is None:
        return 0
    try:
        millis = int(text)
    except ValueError:
        millis = -1
    if millis <= 0:
        raise PlanError(
            f"'{OPTION}'='{text}': give a whole positive number of milliseconds, e.g. '{OPTION}'='5000'"
        )
    return millis


def with_early_results(plan: JobPlan, millis: int, lookup: Callable[[str], Mapping | None]) -> JobPlan:
    """The plan with early results on each window branch (``millis`` 0: the plan as it is).
    PlanError when the job has no window, a window is a session, a sink only appends, or the
    SELECT does not write the window's bounds and keys as columns."""
    if not millis:
        return plan
    branches: list[Branch] = []
    windows = 0
    for b in plan.branches:
        stage = b.stage
        kind = None if stage is None else kinds.kind_of(stage)
        if stage is None or kind is None or kind.family != "window":
            branches.append(b)
            continue
        windows += 1
        if not kind.early_results:
            early = " and ".join(k.title for k in kinds.KINDS if k.early_results)
            raise PlanError(
                f"INSERT INTO {b.sink}: '{OPTION}' gives early results for {early} windows; "
                f"a {kind.title} window's bounds move as it grows (and Spark's update mode refuses "
                f"{kind.name} windows), so its rows cannot be replaced early: drop the option, or use "
                f"{early.replace(' and ', ' or ')}"
            )
        mapping = lookup(b.sink)
        if mapping is not None and not registry.connector(mapping.type).upserts:
            raise PlanError(
                f"INSERT INTO {b.sink}: '{OPTION}' replaces each window's row as it changes, and "
                f"mapping '{mapping.name}' is of type {registry.display_name(mapping.type)}, which only "
                "appends: write to a TYPE DuckDB or TYPE Postgres mapping (rows replaced by window and "
                "keys), or drop the option to append each window once, when it closes"
            )
        keys = window_keys(b)
        if keys is None:
            raise PlanError(
                f"INSERT INTO {b.sink}: '{OPTION}' replaces each window's row by its window and keys, "
                "so the SELECT must write window_start, window_end and each group key as columns of "
                "their own (as they are, or AS a name)"
            )
        if any(c.name.lower() == EARLY for c in b.output):
            raise PlanError(
                f"INSERT INTO {b.sink}: with '{OPTION}' the sink table has a column '{EARLY}' (true "
                f"while the window is open), and the SELECT writes a column of that name: rename it"
            )
        branches.append(replace(b, upsert_keys=keys, early_results_ms=millis))
    if not windows:
        raise PlanError(
            f"job '{plan.job}': '{OPTION}' gives early results for windows (TUMBLE, HOP), and the job "
            "aggregates in none; drop the option"
        )
    return replace(plan, branches=tuple(branches))


def toggled(old_plan: dict[str, Any] | None, stage: str, branch: Branch) -> str | None:
    """``"on"`` or ``"off"`` when early results were turned on or off for ``stage`` between the
    snapshot's job (its plan as JSON; a plan written before the option existed had none) and
    ``branch`` of the new one; None when unchanged."""
    was = False
    for b in (old_plan or {}).get("branches", []):
        if (b.get("stage") or {}).get("name") == stage:
            was = bool(b.get("early_results_ms"))
    now = bool(branch.early_results_ms) and branch.stage is not None and branch.stage.name == stage
    if was == now:
        return None
    return "on" if now else "off"
