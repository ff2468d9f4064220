"""Did you mean: the known name or word closest to a mistyped one, for every message that offers one.

:func:`closest` is the one comparison (difflib's ratio, at least ``cutoff``); the callers choose
how close is close and whether case counts, and write the hint in their own words:
:func:`close_name` for names (``unknown view 'x' (did you mean 'orders'?)``),
:func:`pitstop.sql.words.did_you_mean` for SQL keywords, :mod:`pitstop.sql.typos` for a
misspelt keyword next to a parse error, the shell for backslash commands and catalog names.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable

__all__ = ["CUTOFF", "close_name", "closest"]

CUTOFF = 0.6
"""How close (difflib's ratio) a word must be to be suggested, unless a caller says otherwise."""


def closest(
    word: str,
    candidates: Iterable[str],
    *,
    cutoff: float = CUTOFF,
    fold: Callable[[str], str] | None = None,
    n: int = 1,
) -> list[str]:
    """Up to ``n`` of ``candidates`` close to ``word``, closest first, as the candidates spell them.

    ``fold`` (``str.lower``, ``str.upper``) is applied to the word and the candidates before they
    are compared, so that case does not count; None compares them as they are. Candidates that
    fold alike count once, as the last of them is spelt."""
    folded = {(fold(c) if fold else c): c for c in candidates}
    matches = difflib.get_close_matches(fold(word) if fold else word, list(folded), n=n, cutoff=cutoff)
    return [folded[m] for m in matches]


def close_name(name: str, candidates: Iterable[str]) -> str:
    """``" (did you mean 'orders'?)"`` when ``name`` is close to one of ``candidates`` (a job,
    snapshot, mapping, setting, option...; any case), else ``""``."""
    close = closest(name, candidates, fold=str.lower)
    return f" (did you mean '{close[0]}'?)" if close else ""
