"""A session's transaction block, as PostgreSQL keeps one: its status letter (ReadyForQuery's:
``I`` idle, ``T`` in a block, ``E`` in a failed block, where statements other than ROLLBACK and
COMMIT are refused), and BEGIN, COMMIT, ROLLBACK, SAVEPOINT... answered as PostgreSQL answers them.

No data is written in a block: queries run in read-only transactions of their own, and pitstop's
statements take effect at once. The block is what clients expect to see, and what the SQL
cursors declared in it live by (:mod:`pitstop.server.cursors`).
"""

from __future__ import annotations

from collections.abc import Callable

from pitstop.server import sqlstate
from pitstop.server.outcome import Notice, Outcome
from pitstop.server.routing import Statement
from pitstop.server.sqlstate import WireError


class TransactionBlock:
    """One session's block. ``ended`` is called when a block ends, with whether it committed."""

    def __init__(self, ended: Callable[[bool], None]) -> None:
        self.status = "I"  # I idle, T in a block, E failed block (PostgreSQL's letters)
        self._ended = ended

    def refuse_if_failed(self, stmt: Statement) -> None:
        """A failed block runs nothing but the statement that ends it."""
        if self.status == "E" and not (stmt.route == "tx" and stmt.words[0] in ("ROLLBACK", "ABORT")):
            if not (stmt.route == "tx" and stmt.words[0] in ("COMMIT", "END")):
                raise WireError(
                    sqlstate.IN_FAILED_TRANSACTION,
                    "current transaction is aborted, commands ignored until end of transaction block",
                )

    def fail(self) -> None:
        """A statement failed: the block, if there is one, fails with it."""
        if self.status == "T":
            self.status = "E"

    def run(self, stmt: Statement) -> Outcome:
        """BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE... (the ``tx`` route)."""
        word = stmt.words[0]
        if word in ("BEGIN", "START"):
            notices = []
            if self.status != "I":
                notices.append(
                    Notice(
                        "there is already a transaction in progress", "WARNING", sqlstate.ACTIVE_TRANSACTION
                    )
                )
            self.status = "T" if self.status == "I" else self.status
            return Outcome("BEGIN", notices=notices)
        if word in ("SAVEPOINT", "RELEASE"):
            return Outcome(word)
        if word in ("ROLLBACK", "ABORT") and len(stmt.words) > 1 and stmt.words[1] == "TO":
            if self.status == "E":
                self.status = "T"
            return Outcome("ROLLBACK")
        notices = []
        if self.status == "I":
            notices.append(
                Notice("there is no transaction in progress", "WARNING", sqlstate.NO_ACTIVE_TRANSACTION)
            )
        failed = self.status == "E"
        self.status = "I"
        committed = word in ("COMMIT", "END") and not failed
        self._ended(committed)
        return Outcome("COMMIT" if committed else "ROLLBACK", notices=notices)
