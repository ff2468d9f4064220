"""Misspelt keywords next to a parse error: ``SELEC a``, ``SELECT a FORM s``, ``GROUP BUY k``.

sqlglot reads an unknown word as a name, often as an alias written without AS (``a FORM`` is
``a AS FORM``), and fails a word or a clause later. So when a statement fails, the dialect's
parser records the plain words at the failure (:func:`suspects`): the word it was reported
at, the word it stopped at and the one after, and the word just before when it was read as an
alias without AS. :func:`misspelt_keyword` then calls one of them a misspelling only if it is
close to a keyword (:data:`KEYWORDS`) *and* writing that keyword instead lets the statement parse
further than it did, i.e. the keyword is legal where the word stands.

Nothing here runs on a statement that parses, so a column really named ``form`` or ``selec``
is never flagged; neither is a quoted name, nor an alias written with AS.
"""

from __future__ import annotations

import typing as t

from sqlglot.errors import ParseError
from sqlglot.tokens import Token, TokenType

from pitstop.spelling import closest

# Words a misspelt one may have been meant to be: SQL clause words, the window table
# functions, and pitstop's own statement words.
KEYWORDS = (
    # queries
    "SELECT", "DISTINCT", "FROM", "WHERE", "GROUP", "BY", "HAVING", "ORDER", "LIMIT", "OFFSET",
    "UNION", "EXCEPT", "INTERSECT", "ALL", "AS", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "OUTER",
    "CROSS", "ON", "USING", "WITH", "AND", "OR", "NOT", "BETWEEN", "LIKE", "CASE", "WHEN", "THEN",
    "ELSE", "END", "ASC", "DESC",
    # a job's body
    "INSERT", "INTO", "SINK", "BEGIN",
    # table functions
    "TABLE", "TUMBLE", "HOP", "SESSION", "IMPOSE_ORDER", "DESCRIPTOR", "INTERVAL",
    # pitstop statements
    "CREATE", "DROP", "ALTER", "SHOW", "DESCRIBE", "AWAIT", "EXPLAIN", "REPLACE", "IF", "EXISTS",
    "JOB", "JOBS", "SNAPSHOT", "SNAPSHOTS", "MAPPING", "MAPPINGS", "VIEW", "VIEWS", "OPTIONS",
    "TYPE", "FOR", "WATERMARK", "TIMEOUT", "SUSPEND", "RESUME", "RESTART",
)  # fmt: skip
CUTOFF = 0.75
"""How close (difflib's ratio) a word must be to a keyword: FORM/FROM is 0.75, BUY/BY 0.8."""


class SuspectParseError(ParseError):
    """A ParseError that also carries the plain words at the failure (:func:`suspects`) and
    ``reached``, the offset the parser had got to (the length of the text at its end)."""

    def __init__(
        self,
        message: str,
        errors: list[dict[str, t.Any]] | None = None,
        suspects: tuple[Token, ...] = (),
        reached: int = 0,
    ) -> None:
        super().__init__(message, errors)
        self.suspects = suspects
        self.reached = reached


def suspects(tokens: t.Sequence[Token | None]) -> tuple[Token, ...]:
    """The plain (unquoted, non-keyword) words among ``tokens``, once each, in order.

    ``tokens`` are the token an error is reported at, the parser's current token and the one
    after it (``LEFT JION r``, ``ORDER BUY a`` fail at LEFT and ORDER), and its previous token
    with the one before that: the previous word counts only when it was not written after AS
    (an alias written with AS is never a misspelling)."""
    reported, current, following, previous, before = tokens
    if before is not None and before.token_type == TokenType.ALIAS:
        previous = None
    found: dict[int, Token] = {}
    for token in (reported, current, following, previous):
        if token is not None and token.token_type == TokenType.VAR:
            found.setdefault(token.start, token)
    return tuple(found.values())


def misspelt_keyword(
    text: str, error: SuspectParseError, reached: t.Callable[[str], int | None]
) -> tuple[Token, str] | None:
    """The first suspect word that is a misspelt keyword, and that keyword; None if none is.

    ``reached(text)`` parses a statement and returns how far the parser got (None when it
    parses). A keyword is taken only if the statement, with the keyword written for the word,
    parses or fails later than it did (later than ``error.reached``, shifted by the change of
    length when the word came before it)."""
    for token in error.suspects:
        word = text[token.start : token.end + 1]
        for keyword in close_keywords(word):
            fixed = f"{text[: token.start]}{keyword}{text[token.end + 1 :]}"
            shift = len(keyword) - len(word) if error.reached > token.start else 0
            now = reached(fixed)
            if now is None or now > error.reached + shift:
                return token, keyword
    return None


def close_keywords(word: str) -> list[str]:
    """Keywords close to ``word``, closest first; never the word itself."""
    upper = word.upper()
    if upper in KEYWORDS:
        return []
    return closest(upper, KEYWORDS, cutoff=CUTOFF, n=3)
