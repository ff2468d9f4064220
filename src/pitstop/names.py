"""What a name may be: the one rule for job, snapshot, mapping, view and stage names.

These names become folders and files in the home (``snapshots/<snapshot>/``,
``runs/<job>-<id>/`` with spaces spelt ``_``, ``<run>/sources/<mapping>/``, ``stages/<stage>/``)
and DuckDB table names, so a name must be a safe single path component on every common file
system, whatever the statement it came from. The rule, for all five kinds alike:

- 1 to :data:`MAX_BYTES` bytes long in UTF-8 (128 ASCII characters; fewer in other scripts), so
  that every folder pitstop derives from it, with its suffixes, stays under the 255-byte limit of
  common file systems;
- made of letters and digits of any script (with their combining marks), ``_``, ``$``, ``-``,
  ``.`` and spaces: ``daily_revenue``, ``revenue_v1``, ``"Daily Revenue"``, ``"Umsätze"``,
  ``daily_revenue.aggregate`` are names;
- starting with a letter, a digit or ``_``, and not ending with ``.`` or a space (so never
  ``.``, ``..``, a hidden file, an option-looking ``-x``, or a name that Windows would trim);
- in Unicode's composed form (NFC), so that two names that look alike are alike on disk too.

Everything else is refused: ``/``, ``\\``, ``:``, quotes, NUL and every other control or
invisible formatting character. Quoted identifiers may hold more than this; a quoted name outside
the rule is refused when the statement is parsed or planned, never used.

:func:`safe_path` is the only way a path is built from a name: it checks the name again and makes
sure the result stays inside its root folder.

:func:`quote_ident` is the only way a name is written into SQL text that pitstop builds: any name
(column names too, which this rule does not cover), quoted as the dialect quotes it.
"""

from __future__ import annotations

import functools
import os
import unicodedata
from pathlib import Path

from sqlglot import exp

from pitstop.errors import BadNameError, PitstopError

__all__ = [
    "MAX_BYTES",
    "NAME_RULE",
    "check_name",
    "inside",
    "name_problem",
    "quote_ident",
    "safe_path",
    "within",
]

MAX_BYTES = 128
"""Longest name, in bytes of UTF-8."""

NAME_RULE = (
    f"names are 1 to {MAX_BYTES} bytes of letters, digits, '_', '$', '-', '.' and spaces, "
    "starting with a letter, digit or '_' and not ending with '.' or a space"
)
"""The rule in one sentence, for messages."""

_PUNCTUATION = frozenset("_$-. ")
_UNNAMED = {"Cc": "a control character", "Cs": "a lone surrogate", "Co": "a private-use character"}


def _allowed(char: str) -> bool:
    return char in _PUNCTUATION or unicodedata.category(char)[0] in "LMN"


def _shown(char: str) -> str:
    """A character as a message can show it: printable ones as themselves, others as escapes."""
    if char.isprintable() and not char.isspace():
        return repr(char)
    what = unicodedata.name(char, "") or _UNNAMED.get(unicodedata.category(char), "an unassigned character")
    return f"{ascii(char)} ({what.lower()})"


def name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a job, snapshot, mapping, view or stage name (None: nothing)."""
    if not name:
        return "it is empty"
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        return f"it is {size} bytes long; the longest name is {MAX_BYTES} bytes"
    for char in name:
        if not _allowed(char):
            return f"it contains {_shown(char)}"
    first = name[0]
    if first != "_" and unicodedata.category(first)[0] not in "LN":
        return f"it starts with {_shown(first)}"
    if name[-1] in ". ":
        return f"it ends with {_shown(name[-1])}"
    if not unicodedata.is_normalized("NFC", name):
        return "it is not in Unicode's composed form (NFC); retype it"
    return None


def _quoted(name: str) -> str:
    """``name`` in single quotes for a message, cut short and with unprintable characters escaped."""
    text = name if len(name) <= 40 else name[:40] + "..."
    if not text.isprintable():
        text = ascii(text)[1:-1]
    return "'" + text + "'"


def check_name(kind: str, name: str) -> str:
    """``name`` if it is a valid ``kind`` name (``job``, ``snapshot``, ``mapping``, ``view``,
    ``stage``, ...); otherwise :class:`~pitstop.errors.BadNameError` quoting it, saying what is
    wrong and what names may contain."""
    problem = name_problem(name)
    if problem is not None:
        raise BadNameError(f"{kind} name {_quoted(name)} is not allowed: {problem}; {NAME_RULE}")
    return name


def safe_path(root: str | os.PathLike[str], kind: str, name: str, suffix: str = "", prefix: str = "") -> Path:
    """``root / (prefix + name + suffix)``, after checking ``name`` with :func:`check_name` and that the
    resulting path stays directly inside ``root`` (resolved, so a symlink cannot lead out of it).

    Every folder or file pitstop names after a job, snapshot, mapping or stage is built here, so a
    caller that forgot to check a name still cannot address anything outside its root.
    """
    check_name(kind, name)
    base = Path(root)
    path = base / f"{prefix}{name}{suffix}"
    resolved_root = base.resolve()
    if path.parent.resolve() != resolved_root or path.resolve().parent != resolved_root:
        raise BadNameError(f"{kind} name {_quoted(name)} would leave the folder {base}; {NAME_RULE}")
    return path


def inside(root: str | os.PathLike[str], relative: str) -> Path:
    """``root / relative`` for a relative path read from a file pitstop wrote (a snapshot's
    manifest), refused unless it stays inside ``root`` once resolved."""
    base = Path(root).resolve()
    path = Path(root) / relative
    if Path(relative).is_absolute() or not path.resolve().is_relative_to(base):
        raise PitstopError(
            f"path '{relative}' leads outside the folder {root}; the file that names it was altered: "
            "restore from another snapshot"
        )
    return path


def within(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether ``path``, a folder the catalog names, lies below ``root`` once both are resolved:
    the test before pitstop deletes it. An older pitstop built folders from names that the rule
    now refuses (``runs/../x-1a2b``): such a folder is never deleted, only reported."""
    base, target = Path(root).resolve(), Path(path).resolve()
    return target != base and target.is_relative_to(base)


@functools.lru_cache(maxsize=4096)
def quote_ident(name: str, dialect: str = "duckdb") -> str:
    """``name`` as one quoted identifier of ``dialect``'s SQL, whatever it holds: ``"a""b"`` for
    DuckDB and PostgreSQL (double quotes, a quote inside doubled), ```a``b``` for Spark
    (``"spark"``: backticks, a backtick doubled). The case is kept and reserved words are safe.

    sqlglot writes it, from the same dialect tables that read pitstop's SQL, so every dialect
    pitstop writes SQL for is quoted by one rule. Cached: sinks quote the same few names for every
    batch, and sqlglot's generator costs some 25 µs a call. (SQL sent through psycopg is composed
    with ``psycopg.sql.Identifier``, the driver's own quoting, instead.)"""
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)
