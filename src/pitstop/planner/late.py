"""Late rows: ``CREATE JOB j OPTIONS ('lateRows'='keep') AS ...``.

Every row a stateful stage drops because it is behind the watermark is counted, per stage,
source and partition (:mod:`pitstop.engine.late`): SHOW JOBS, DESCRIBE JOB and ``pitstop.late_rows`` show the
counts. The option says what else becomes of them:

- ``count`` (the default): counted only;
- ``keep``: also kept in ``pitstop.late_records``, each with the window it missed, the watermark
  that made it late, and the stage's input row as JSON (a row a HOP stage drops from two windows
  is two records). Only the rows of a branch's first stateful stage are kept (a stage later in a
  chain has its late rows counted). It costs a trip through Python for every row of the stage's
  input, which counting does not.

Pitstop never drops a row for this option: Spark's stateful operator (or a restored stage's own
filter) drops late rows as it did, and pitstop copies out those that its rule (the same as
Spark's, evaluated before the stage with the micro-batch's watermark) says are dropped. The option
is part of the job's plan, so a job resumed from its checkpoints keeps them as it did; to change
it, DROP JOB ... WITH SNAPSHOT and CREATE JOB ... FROM SNAPSHOT with the option changed.
"""

from __future__ import annotations

from dataclasses import replace

from pitstop.errors import PlanError
from pitstop.plan.model import JobPlan

OPTION = "lateRows"
CHOICES = ("count", "keep")


def with_late_rows(plan: JobPlan, options: dict[str, str]) -> JobPlan:
    """The plan with the option applied; PlanError for a value it does not take."""
    text = options.get(OPTION)
    if text is None:
        return plan
    value = text.strip().lower()
    if value not in CHOICES:
        raise PlanError(
            f"'{OPTION}'='{text}': write 'count' (late rows are counted) or 'keep' (they are also kept "
            "in pitstop.late_records, with the window they missed)"
        )
    return replace(plan, keep_late=value == "keep")
