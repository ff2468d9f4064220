"""Pygments highlighting of pitstop's dialect: standard SQL plus the dialect's own words and the
shell's backslash commands."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from prompt_toolkit.lexers import PygmentsLexer
from prompt_toolkit.styles import BaseStyle, Style, merge_styles, style_from_pygments_cls
from pygments.lexer import inherit, words
from pygments.lexers.sql import SqlLexer
from pygments.styles import get_style_by_name
from pygments.token import Keyword, Name

from pitstop.shell.syntax import DIALECT_KEYWORDS


class PitstopLexer(SqlLexer):
    """SQL with ``CREATE JOB``, ``AWAIT``, ``SNAPSHOT``, ``TUMBLE``, ... as keywords."""

    name = "pitstop"
    aliases: ClassVar[list[str]] = ["pitstop"]
    flags = re.IGNORECASE
    tokens: ClassVar[dict[str, Any]] = {
        "root": [
            (r"\\[a-zA-Z?]+", Name.Builtin),  # \jobs, \d, \help
            (words(DIALECT_KEYWORDS, suffix=r"\b"), Keyword),
            inherit,
        ]
    }


def lexer() -> PygmentsLexer:
    return PygmentsLexer(PitstopLexer)


def style(name: str = "default") -> BaseStyle:
    toolbar = Style.from_dict(
        {
            "bottom-toolbar": "noreverse bg:#303030 #d0d0d0",
            "bottom-toolbar.running": "bg:#303030 #87d787 bold",
            "bottom-toolbar.stopped": "bg:#303030 #d7d787",
            "bottom-toolbar.failed": "bg:#303030 #ff8787 bold",
            "bottom-toolbar.dim": "bg:#303030 #8a8a8a",
        }
    )
    return merge_styles([style_from_pygments_cls(get_style_by_name(name)), toolbar])
