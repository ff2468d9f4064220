"""pitstop's one log setup, for every front end: the whole text of everything logged goes to
``<home>/logs/pitstop.log`` (tracebacks included; Spark's own log is ``spark.log`` beside it), and
the terminal shows warnings and errors one line each, saying where the rest is. ``--verbose``
shows everything on the terminal too.

A log file that cannot be written (its disk full, a quota reached, an I/O error) does not print
Python's "--- Logging error ---" and a traceback per line: the terminal is told once, in one
sentence; lines are dropped until a write succeeds again, and then the log says how many were
lost."""

from __future__ import annotations

import errno
import logging
import os
import sys
import time
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"
# ``log.error(..., exc_info=True, extra=FILE_ONLY)``: for the log file only, where the front end
# has already said it in its own words.
FILE_ONLY = {"file_only": True}


class _FirstLine(logging.Formatter):
    """A record's first line; a traceback or the lines after it are in the log file."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")
        self.file: Path | None = None

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        first = message.split("\n", 1)[0]
        more = first != message or record.exc_info is not None or record.stack_info is not None
        if more:
            where = f"; the whole text is in {self.file}" if self.file is not None else ""
            first = f"{first.rstrip(':')} (more{where})"
        return f"{record.levelname} {record.name}: {first}"


_terminal: logging.Handler | None = None
_files: dict[Path, logging.Handler] = {}

# A write that fails for these is the disk's fault, not the record's: drop lines until it passes.
_UNWRITABLE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})


def _say(message: str) -> None:
    """One warning on the terminal, never in a log file (which is what cannot be written)."""
    record = logging.LogRecord(__name__, logging.WARNING, __file__, 0, message, None, None)
    if _terminal is not None:
        _terminal.handle(record)
    else:
        sys.stderr.write(f"WARNING {__name__}: {message}\n")


class _HomeLog(logging.FileHandler):
    """``<home>/logs/pitstop.log``. A write that fails with ENOSPC, EDQUOT or EIO: said once on
    the terminal, the line dropped (the half-written file closed: nothing buffered is kept for
    later), and so is every line after it until a write succeeds; the first line that does is a
    note of how many were lost."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.lost = 0
        self.since = ""  # when the first lost line was logged
        self.reason = ""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.lost:
                self._write(self._note(), after_a_cut_line=True)
                self.lost = 0
            self._write(self.format(record))
        except OSError as error:
            if error.errno not in _UNWRITABLE:
                self.handleError(record)
            else:
                self._lose(error)
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - logging's own rule: a record that fails says so
            self.handleError(record)

    def _write(self, text: str, after_a_cut_line: bool = False) -> None:
        if self.stream is None:
            self.stream = self._open()
        if after_a_cut_line and not self._ends_a_line():
            text = "\n" + text  # the line the disk cut short ends here
        self.stream.write(text + self.terminator)
        self.stream.flush()

    def _ends_a_line(self) -> bool:
        with open(self.baseFilename, "rb") as f:
            if f.seek(0, os.SEEK_END) == 0:
                return True
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def _lose(self, error: OSError) -> None:
        stream, self.stream = self.stream, None  # type: ignore[assignment] # reopened by _write
        if stream is not None:
            try:
                stream.close()  # flushes what is buffered, which fails again: dropped with it
            except OSError:
                pass
        if not self.lost:
            self.since = time.strftime("%Y-%m-%d %H:%M:%S")
            reason = os.strerror(error.errno or errno.EIO)
            self.reason = reason[:1].lower() + reason[1:]
            _say(
                f"the log {self.baseFilename} could not be written: {self.reason}; its lines are "
                "dropped until it can be written again, and it will say how many were lost"
            )
        self.lost += 1

    def _note(self) -> str:
        message = (
            f"{self.lost} log line(s) lost from {self.since} to {time.strftime('%Y-%m-%d %H:%M:%S')}: "
            f"{self.baseFilename} could not be written ({self.reason})"
        )
        return self.format(logging.LogRecord(__name__, logging.WARNING, __file__, 0, message, None, None))


class _ToRoot(logging.Handler):
    """Hands a record to the root logger's handlers (this module's), for a logger that does not
    propagate and cannot be made to."""

    def emit(self, record: logging.LogRecord) -> None:
        for handler in logging.getLogger().handlers:
            if record.levelno >= handler.level:
                handler.handle(record)


# PySpark's loggers for the query context of an error it converts: each writes a JSON line with
# Spark's message to stderr for every error converted, even one pitstop catches and reports itself
# in a sentence (a job's failure, a failed replay). Adopted (:func:`adopt`): their lines go to the
# log file, and to the terminal only with --verbose.
SPARK_ECHOES = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def adopt(logger: logging.Logger) -> None:
    """Route a logger of a library's own (its handlers replaced, its records through this module's
    handlers) whose records say again what pitstop reports: see ``SPARK_ECHOES``. Its ``propagate``
    is set again by PySpark on every use, hence the handler rather than propagation."""
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    logging.Logger.addHandler(logger, _ToRoot())  # (PySparkLogger.addHandler sets its JSON format)


def terminal(verbose: bool = False) -> None:
    """The terminal's handler (stderr): warnings and errors one line each; with ``verbose``,
    everything from INFO, whole."""
    global _terminal
    root = logging.getLogger()
    if _terminal is not None:
        root.removeHandler(_terminal)
    handler = logging.StreamHandler()
    if verbose:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.INFO)
    else:
        handler.setFormatter(_FirstLine())
        handler.setLevel(logging.WARNING)
        # py4j's report of a Python callback that raised, and PySpark's of an error it converts,
        # are the same failure pitstop reports itself in one sentence: they stay in the log file.
        handler.addFilter(lambda r: not r.name.startswith("py4j") and r.name not in SPARK_ECHOES)
    handler.addFilter(lambda record: not getattr(record, "file_only", False))
    root.addHandler(handler)
    _terminal = handler
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO if verbose else logging.WARNING)


def log_file() -> Path | None:
    """The log file this process writes (the last home it opened), or None."""
    return next(reversed(_files), None)


def to_home(home: Path) -> Path:
    """Log the whole text of everything from INFO to ``<home>/logs/pitstop.log`` (once per home
    in a process); returns the file's path."""
    folder = home / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    path = (folder / "pitstop.log").resolve()
    if path in _files:
        return path
    handler = _HomeLog(path)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    root.addHandler(handler)
    _files[path] = handler
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    if _terminal is not None and isinstance(_terminal.formatter, _FirstLine):
        _terminal.formatter.file = path
    return path
