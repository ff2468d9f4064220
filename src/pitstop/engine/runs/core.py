"""A job run: one Spark streaming query per branch, each with its own checkpoint in the run folder."""

from __future__ import annotations

from pitstop.engine.runs.lateness import RunLateRows
from pitstop.engine.runs.stopping import RunStopping


class ActiveRun(RunStopping, RunLateRows):
    """A run of a job in this process: its fields are :class:`~pitstop.engine.runs.state.RunState`'s."""
