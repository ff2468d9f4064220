"""Small helpers for the dialect's messages and token checks."""

from __future__ import annotations

import typing as t

from sqlglot.tokens import TokenType

from pitstop.spelling import closest

# Tokens that are values, never keywords: a quoted 'TUMBLE' or "JOB" is not the keyword.
LITERAL_TOKENS = frozenset({TokenType.STRING, TokenType.IDENTIFIER, TokenType.NUMBER})


def one_of(words: t.Iterable[str]) -> str:
    """``JOB, MAPPING or SNAPSHOT``."""
    items = list(words)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def did_you_mean(word: str, candidates: t.Iterable[str]) -> str:
    """``"; did you mean JOB?"`` when ``word`` is close to one of ``candidates`` (any case) and is
    not that word, else ``""``."""
    close = closest(word, candidates, fold=str.upper)
    return f"; did you mean {close[0]}?" if close and close[0].upper() != word.upper() else ""
