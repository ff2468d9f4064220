"""Error text for people: the file a statement came from, and "did you mean" for a mistyped name.

The suggestion belongs in the executor eventually (it knows the catalog when it raises); until
then the front ends add it here, from the catalog's names, for the executor's
``unknown job 'x'`` / ``unknown mapping 'x'`` / ``unknown snapshot 'x'`` messages.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pitstop.errors import PitstopError
from pitstop.spelling import closest

if TYPE_CHECKING:
    from pitstop.catalog.store import Catalog

_UNKNOWN = re.compile(r"unknown (job|mapping|snapshot) '([^']*)'")


def catalog_names(catalog: Catalog | None, kind: str) -> list[str]:
    """Names of the catalog's jobs, mappings or snapshots (``kind``: job, mapping, snapshot)."""
    if catalog is None:
        return []
    if kind == "job":
        return [j.name for j in catalog.jobs()]
    if kind == "mapping":
        return [m.name for m in catalog.mappings()]
    return catalog.snapshot_names()


def with_suggestion(message: str, catalog: Catalog | None) -> str:
    """``message`` with ``; did you mean 'y'?`` after an unknown name that is close to a known one."""
    match = _UNKNOWN.search(message)
    if match is None or "did you mean" in message:
        return message
    kind, name = match.groups()
    try:
        names = catalog_names(catalog, kind)
    except Exception:  # noqa: BLE001 - a suggestion must never hide the error itself
        return message
    close = closest(name, names, fold=str.lower)
    if not close:
        return message
    return f"{message[: match.end()]}; did you mean '{close[0]}'?{message[match.end() :]}"


def error_text(err: PitstopError, catalog: Catalog | None = None) -> str:
    """``ERROR in FILE at line L, col C: message`` + the line + a caret; ``ERROR: message`` when
    the error has no position."""
    message = with_suggestion(err.message, catalog)
    if err.line is None:
        return f"ERROR: {message}"
    text = str(PitstopError(message, err.line, err.col, err.source_line))
    if err.file:
        text = text.replace("ERROR at line", f"ERROR in {err.file} at line", 1)
    return text
