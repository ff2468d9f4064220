"""A job run: one Spark streaming query per branch, each with its own checkpoint in the run folder.

Run folder layout::

    <home>/runs/<run_id>/branches/<i>/checkpoint    Spark checkpoint of branch i
    <home>/runs/<run_id>/sources/<source>/          discovery log and fence (connectors.positions)

- :mod:`.core`: :class:`ActiveRun`, all the parts below;
- :mod:`.state`: the run's fields; :mod:`.branch`: one branch's query, its gate and output mode;
- :mod:`.starting`, :mod:`.watching` (restarts, failures, AWAIT JOB), :mod:`.stopping` (cuts),
  :mod:`.lateness` (late rows of committed batches): the run's parts;
- :mod:`.failures`: a failed Spark query in words.
"""

from __future__ import annotations

from pitstop.engine.runs.branch import BranchQuery
from pitstop.engine.runs.core import ActiveRun
from pitstop.engine.runs.stopping import Cut

__all__ = ["ActiveRun", "BranchQuery", "Cut"]
