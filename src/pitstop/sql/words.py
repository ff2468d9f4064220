"""Small helpers for the dialect's messages and token checks."""

from __future__ import annotations

import difflib
import typing as t

from sqlglot.tokens import TokenType

# Tokens that are values, never keywords: a quoted 'TUMBLE' or "JOB" is not the keyword.
LITERAL_TOKENS = frozenset({TokenType.STRING, TokenType.IDENTIFIER, TokenType.NUMBER})


def one_of(words: t.Iterable[str]) -> str:
    """``JOB, MAPPING or SNAPSHOT``."""
    items = list(words)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def close_name(name: str, candidates: t.Iterable[str]) -> str:
    """``" (did you mean 'orders'?)"`` when ``name`` is close to one of ``candidates`` (a job,
    snapshot, mapping, setting...; any case), else ``""``."""
    lowered = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return f" (did you mean '{lowered[close[0]]}'?)" if close else ""


def did_you_mean(word: str, candidates: t.Iterable[str]) -> str:
    """``"; did you mean JOB?"`` when ``word`` is close to one of ``candidates``, else ``""``."""
    options = {candidate.upper(): candidate for candidate in candidates}
    matches = difflib.get_close_matches(word.upper(), list(options), n=1, cutoff=0.6)
    return f"; did you mean {options[matches[0]]}?" if matches and matches[0] != word.upper() else ""
