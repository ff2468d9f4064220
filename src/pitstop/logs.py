"""pitstop's one log setup, for every front end: the whole text of everything logged goes to
``<home>/logs/pitstop.log`` (tracebacks included; Spark's own log is ``spark.log`` beside it), and
the terminal shows warnings and errors one line each, saying where the rest is. ``--verbose``
shows everything on the terminal too."""

from __future__ import annotations

import logging
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
        # py4j's report of a Python callback that raised is the same failure pitstop reports
        # itself in one sentence; its traceback stays in the log file.
        handler.addFilter(lambda record: not record.name.startswith("py4j"))
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
    handler = logging.FileHandler(path)
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
