"""``statement_timeout``: a statement that runs longer than its session's setting is cancelled as a
cancel request would cancel it (its DuckDB query interrupted, a wait stopped; jobs go on), and
the error it then fails with says why, as PostgreSQL's does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pitstop.server import sqlstate
from pitstop.server.params import milliseconds
from pitstop.server.sqlstate import WireError


class StatementTimeout:
    """The timer of the statement a session runs; ``cancel`` (the session's) is called from the
    timer's thread when it fires."""

    def __init__(self, cancel: Callable[[], None]) -> None:
        self._cancel = cancel
        self._timer: threading.Timer | None = None  # statement_timeout of the statement running
        self._timed_out = False

    def start(self, setting: str) -> None:
        """A statement begins: time it by ``setting``, statement_timeout's value (0: no limit)."""
        self.stop()
        self._timed_out = False
        ms = milliseconds("statement_timeout", setting)
        if ms > 0:
            self._timer = threading.Timer(ms / 1000, self._time_out)
            self._timer.daemon = True
            self._timer.start()

    def _time_out(self) -> None:
        self._timed_out = True
        self._cancel()  # as a cancel request: the query is interrupted, a wait stops; jobs go on

    def stop(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def said(self, err: WireError) -> WireError:
        """A statement cancelled by its statement_timeout says so, as PostgreSQL does."""
        if self._timed_out and err.code == sqlstate.QUERY_CANCELED:
            return WireError(sqlstate.QUERY_CANCELED, "canceling statement due to statement timeout")
        return err
