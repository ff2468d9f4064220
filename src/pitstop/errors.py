"""pitstop's exception family.

Every error a user can meet is a :class:`PitstopError`. Messages name the job, snapshot, stage or
mapping they are about and say what to do next. SQL errors also carry a position (1-based line and
column in the script) and render the offending line with a caret under the mistake.

Each class carries the SQLSTATE a PostgreSQL client receives for it (``sqlstate``), so that the
server answers by class and a client maps a code back to its class, both from here.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pitstop.dsn import mask


class PitstopError(Exception):
    """Root of every error pitstop reports to users.

    An error may carry a position in a script (1-based line and column); then ``str(err)`` reads
    ``ERROR at line 7, col 8: message`` followed by the line and a caret under the column.
    """

    sqlstate: ClassVar[str] = "XX000"  # internal_error
    names_its_subject: ClassVar[bool] = False
    """The message's first quoted name is what the error is about (``unknown job 'x'``): the caret
    goes under it in the statement, not under the statement's start."""

    def __init__(
        self,
        message: str,
        line: int | None = None,
        col: int | None = None,
        source_line: str | None = None,
        file: str | None = None,
        subject: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col
        self.source_line = source_line
        self.file = file
        if subject is None and self.names_its_subject:
            quoted = re.search(r"'((?:[^']|'')+)'", message)
            subject = quoted.group(1).replace("''", "'") if quoted else None
        self.subject = subject
        """The name in the statement the error is about (the caret goes under it), or None."""

    def at(
        self, line: int, col: int, source_line: str | None = None, file: str | None = None
    ) -> PitstopError:
        """Position this error in a script (keeping its class); returns the error itself."""
        self.line, self.col, self.source_line, self.file = line, col, source_line, file
        return self

    def __str__(self) -> str:
        if self.line is None:
            return self.message
        text = f"ERROR at line {self.line}, col {self.col}: {self.message}"
        if self.source_line is not None and self.col is not None:
            # a DSN's password is not shown, even here
            line, before = mask(self.source_line), mask(self.source_line[: max(self.col - 1, 0)])
            text += f"\n  {line}\n  {' ' * min(len(before), len(line))}^"
        return text


class SqlError(PitstopError):
    """A statement that cannot be parsed, with its position in the script."""

    sqlstate = "42601"  # syntax_error


class BadNameError(SqlError):
    """A job, snapshot, mapping, view or stage name that is not a safe folder or table name
    (see :mod:`pitstop.names` for the rule)."""

    sqlstate = "42602"  # invalid_name


class CatalogError(PitstopError):
    """Unknown or duplicate mapping, job or snapshot; a catalog that cannot be opened."""

    sqlstate = "55000"  # object_not_in_prerequisite_state


class UnknownObjectError(CatalogError):
    """No mapping, view, job or snapshot of that name."""

    sqlstate = "42704"  # undefined_object
    names_its_subject = True


class DuplicateObjectError(CatalogError):
    """A mapping, view, job or snapshot of that name exists already."""

    sqlstate = "42710"  # duplicate_object
    names_its_subject = True


class PlanError(PitstopError):
    """A job query that pitstop cannot run as a streaming job."""

    sqlstate = "42000"  # syntax_error_or_access_rule_violation


class NotSupportedError(PlanError):
    """SQL that pitstop does not run (yet); the message says what to write instead."""

    sqlstate = "0A000"  # feature_not_supported


class UnknownOptionError(PlanError):
    """A setting or job option pitstop does not know."""

    sqlstate = "42704"  # undefined_object
    names_its_subject = True


class CompatibilityError(PitstopError):
    """A snapshot whose state cannot be restored into the new job."""

    sqlstate = "55000"  # object_not_in_prerequisite_state


class JobFailedError(PitstopError):
    """A job's Spark query failed; the message carries Spark's reason."""

    sqlstate = "58000"  # system_error: Spark's failure, named in the message


class RejectedRecordError(PitstopError):
    """A malformed record in a File mapping with ``'onError'='fail'``; the message names the
    mapping, the file, the line and the reason."""


class DataLossError(PitstopError):
    """A Kafka source's position lies outside what the broker holds (a topic deleted and created
    again or truncated; records deleted by retention before the job read them) with
    ``'onDataLoss'='fail'``; the message names the mapping, topic, partitions and offsets."""


FINAL_SOURCE_ERRORS: tuple[type[PitstopError], ...] = (RejectedRecordError, DataLossError)
"""What a source raises when no restart can change it: reading again meets the same."""


class CancelledError(PitstopError):
    """A statement whose wait was cancelled (Ctrl-C, a client's cancel request); the job goes on."""

    sqlstate = "57014"  # query_canceled


class AwaitTimeoutError(PitstopError):
    """``AWAIT JOB`` did not see the job catch up within its timeout."""

    sqlstate = "57014"  # query_canceled


class PermissionDeniedError(PitstopError):
    """A statement the connected user's role may not run."""

    sqlstate = "42501"  # insufficient_privilege


def all_errors() -> list[type[PitstopError]]:
    """Every error class, the root first, then each class's subclasses in the order they are
    defined here (of two classes with one SQLSTATE, a client maps it to the first)."""
    out: list[type[PitstopError]] = [PitstopError]
    for cls in out:
        out.extend(cls.__subclasses__())
    return out


def subject_offset(text: str, subject: str | None) -> int | None:
    """Where ``subject`` stands in a statement's text as a whole name, quoted or not (the quote
    included), after the statement's first word: where it is written as named, else its last
    place in any case (``DROP JOB job``: the name, not the keyword); None if it is not there."""
    if not subject:
        return None
    first = re.match(r"\s*\w+", text)
    skip = first.end() if first else 0
    pattern = r"""(?<![\w$])(['"]?)(""" + re.escape(subject) + r""")\1(?![\w$])"""
    found = list(re.finditer(pattern, text[skip:], re.I))
    if not found:
        return None
    exact = [m for m in found if m.group(2) == subject]
    return skip + (exact[0] if exact else found[-1]).start()
