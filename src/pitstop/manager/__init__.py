"""The manager: one per process. It owns the catalog, the Spark session (started lazily) and the
runs of the jobs this process is running.

- :mod:`.core`: :class:`Manager`, all the parts below, and its shutdown;
- :mod:`.base`: the state every part shares and the Spark session;
- :mod:`.jobs`: starting, resuming, failing and altering jobs;
- :mod:`.snapshots`: DROP JOB [WITH SNAPSHOT], CREATE SNAPSHOT, DROP SNAPSHOT;
- :mod:`.collect`: rejects and late rows recorded from run folders;
- :mod:`.supervisor`: the supervisor's round, metrics samples, the runs' live status.
"""

from __future__ import annotations

from pitstop.manager.core import Manager

__all__ = ["Manager"]
