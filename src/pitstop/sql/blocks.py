"""Where statements end and where an offset is: a job's ``AS BEGIN ... END`` block followed word
by word (:class:`JobBlock`), tokens split into statements at ';' outside it (:func:`chunk_tokens`),
and the 1-based line and column of an offset in a script (:func:`position`)."""

from __future__ import annotations

from sqlglot.tokens import Token, TokenType

from pitstop.sql.words import LITERAL_TOKENS


class JobBlock:
    """Tracks whether a statement is inside a job's ``AS BEGIN ... END`` block, word by word.

    The block opens at ``BEGIN`` right after the ``AS`` that ends a job's header (``CREATE JOB``
    or ``EXPLAIN CREATE JOB``, before any INSERT/SINK/SELECT/WITH). Inside it ``BEGIN`` and
    ``CASE`` open a level and ``END`` closes one, so ``CASE ... END`` does not end the block.
    Shared by :func:`chunk_tokens` (tokens) and ``parser.split_statements`` (characters).
    """

    BODY_WORDS = frozenset({"INSERT", "SINK", "SELECT", "WITH"})

    def __init__(self) -> None:
        self.depth = 0
        self._head: list[str] = []
        self._previous = ""
        self._in_body = False

    def feed(self, word: str) -> None:
        """The next upper-case word of the statement; "" for a literal or punctuation."""
        if self.depth:
            if word in ("BEGIN", "CASE"):
                self.depth += 1
            elif word == "END":
                self.depth -= 1
        elif word == "BEGIN" and self._previous == "AS" and self._in_job_header():
            self.depth = 1
        if word and len(self._head) < 5:
            self._head.append(word)
        self._in_body = self._in_body or word in self.BODY_WORDS
        self._previous = word

    def _in_job_header(self) -> bool:
        return (
            not self._in_body
            and bool(self._head)
            and self._head[0] in ("CREATE", "EXPLAIN")
            and "JOB" in self._head
        )


def chunk_tokens(raw_tokens: list[Token]) -> list[list[Token]]:
    """Split tokens into statements at ';', except inside a job's ``AS BEGIN ... END`` block
    (see :class:`JobBlock`). Empty statements are dropped."""
    chunks: list[list[Token]] = [[]]
    block = JobBlock()
    for token in raw_tokens:
        if token.token_type == TokenType.SEMICOLON and not block.depth:
            chunks.append([])
            block = JobBlock()
            continue
        chunks[-1].append(token)
        block.feed("" if token.token_type in LITERAL_TOKENS else token.text.upper())
    return [chunk for chunk in chunks if chunk] or [[]]


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, col) of character ``offset`` in ``text``."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col
