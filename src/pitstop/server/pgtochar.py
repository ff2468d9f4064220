"""PostgreSQL's ``to_char(timestamp, pattern)`` as a DuckDB expression.

DuckDB has no ``to_char``, and its ``strftime`` reads ``'Mon DD'`` as text: a dashboard's axis
labels came out ``Mon 01``. A literal pattern is read here with PostgreSQL's template patterns
(``formatting.c``: the longest keyword first, its case choosing the case of names, ``FM`` to drop
the padding, ``TH`` for an ordinal, ``"..."`` and ``\\`` for literal text) and becomes a
concatenation of DuckDB date-part functions, each padded as PostgreSQL pads it (``Month`` and
``Day`` to 9 characters, numbers with zeros). The time zone patterns (``TZ``, ``OF``, ``TZH``,
``TZM``) print what PostgreSQL prints in the session's ``TimeZone``: its abbreviation and offset
(``CEST``, ``+02``) for a timestamptz or a date, nothing and ``+00`` for a timestamp. ``TM`` is
read and ignored (names are English, as in the C locale), and ``SP`` (spell mode, which
PostgreSQL does not implement) prints nothing, as there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from sqlglot import exp

__all__ = ["to_char_time", "zone_abbreviation"]

_TS = "__pgs_ts"


@dataclass(frozen=True)
class _Number:
    """A numeric field: its value as DuckDB SQL over ``__pgs_ts`` and its zero-padded width."""

    sql: str
    width: int


# Numeric fields (their upper and lower case spellings mean the same).
_NUMBERS: dict[str, _Number] = {
    "Y,YYY": _Number("", 0),  # handled apart: a comma inside
    "YYYY": _Number(f"year({_TS})", 4),
    "YYY": _Number(f"year({_TS}) % 1000", 3),
    "YY": _Number(f"year({_TS}) % 100", 2),
    "Y": _Number(f"year({_TS}) % 10", 1),
    "IYYY": _Number(f"isoyear({_TS})", 4),
    "IYY": _Number(f"isoyear({_TS}) % 1000", 3),
    "IY": _Number(f"isoyear({_TS}) % 100", 2),
    "I": _Number(f"isoyear({_TS}) % 10", 1),
    "MM": _Number(f"month({_TS})", 2),
    "IDDD": _Number(f"(week({_TS}) - 1) * 7 + isodow({_TS})", 3),
    "DDD": _Number(f"dayofyear({_TS})", 3),
    "DD": _Number(f"day({_TS})", 2),
    "D": _Number(f"dayofweek({_TS}) + 1", 1),
    "ID": _Number(f"isodow({_TS})", 1),
    "HH24": _Number(f"hour({_TS})", 2),
    "HH12": _Number(f"(hour({_TS}) + 11) % 12 + 1", 2),
    "HH": _Number(f"(hour({_TS}) + 11) % 12 + 1", 2),
    "MI": _Number(f"minute({_TS})", 2),
    "SSSSS": _Number(f"hour({_TS}) * 3600 + minute({_TS}) * 60 + second({_TS})", 1),
    "SSSS": _Number(f"hour({_TS}) * 3600 + minute({_TS}) * 60 + second({_TS})", 1),
    "SS": _Number(f"second({_TS})", 2),
    "MS": _Number(f"millisecond({_TS}) % 1000", 3),
    "US": _Number(f"microsecond({_TS}) % 1000000", 6),
    "Q": _Number(f"quarter({_TS})", 1),
    "WW": _Number(f"(dayofyear({_TS}) - 1) // 7 + 1", 2),
    "W": _Number(f"(day({_TS}) - 1) // 7 + 1", 1),
    "IW": _Number(f"week({_TS})", 2),
    "CC": _Number(f"century({_TS})", 2),
    "J": _Number(f"CAST(julian(CAST({_TS} AS DATE)) AS BIGINT)", 1),
}
# Names: the keyword's case is the output's case; Month and Day are padded to 9 characters.
_NAMES: dict[str, tuple[str, int]] = {
    "MONTH": ("%B", 9), "MON": ("%b", 0), "DAY": ("%A", 9), "DY": ("%a", 0),
}  # fmt: skip
_MERIDIEM = {"AM": ("AM", "PM"), "PM": ("AM", "PM"), "A.M.": ("A.M.", "P.M."), "P.M.": ("A.M.", "P.M.")}
_ERAS = {"AD": ("AD", "BC"), "BC": ("AD", "BC"), "A.D.": ("A.D.", "B.C."), "B.C.": ("A.D.", "B.C.")}
_ROMAN = ("I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII")
# Time zones, as PostgreSQL prints them in the session's TimeZone (DuckDB's connection has it). A
# timestamp has no zone (TZ prints nothing, OF +00); to_char of a date reads it as a timestamptz
# (PostgreSQL's preferred type). DuckDB's %z is PostgreSQL's OF: +02, +05:30, -02:30.
_ZONED = f"typeof({_TS}) IN ('TIMESTAMP WITH TIME ZONE', 'DATE')"
_OFFSET = f"strftime(CAST({_TS} AS TIMESTAMPTZ), '%z')"
_ABBREVIATION = f"pgs_tz_abbrev(CAST({_TS} AS TIMESTAMPTZ), current_setting('TimeZone'))"
_ZONES: dict[str, str] = {
    "TZ": f"(CASE WHEN {_ZONED} THEN upper({_ABBREVIATION}) ELSE '' END)",
    "tz": f"(CASE WHEN {_ZONED} THEN lower({_ABBREVIATION}) ELSE '' END)",
    "OF": f"(CASE WHEN {_ZONED} THEN {_OFFSET} ELSE '+00' END)",
    "TZH": f"(CASE WHEN {_ZONED} THEN substr({_OFFSET}, 1, 3) ELSE '+00' END)",
    "TZM": f"(CASE WHEN {_ZONED} AND length({_OFFSET}) >= 6 THEN substr({_OFFSET}, 5, 2) ELSE '00' END)",
}
_FRACTIONS = {f"FF{n}": n for n in range(1, 7)}  # the first n digits of the microseconds
_SPELL = "SP"  # a suffix: spell mode, which PostgreSQL does not implement (it prints nothing)
_KEYWORDS = sorted(
    [*_NUMBERS, *_NAMES, *_MERIDIEM, *_ERAS, "RM", "FX", "TZ", "OF", "TZH", "TZM", *_FRACTIONS, _SPELL],
    key=lambda k: (-len(k), k),
)


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _cased(sql: str, written: str) -> str:
    """A name in the case its keyword is written in: MONTH, Month, month."""
    if written.isupper():
        return f"upper({sql})"
    if written.islower():
        return f"lower({sql})"
    return sql


def _match(pattern: str, at: int) -> str | None:
    """The keyword at ``at``, as written: PostgreSQL accepts the upper and the lower case spelling
    (and ``Month``, ``Mon``, ``Day``, ``Dy`` for names)."""
    for keyword in _KEYWORDS:
        written = pattern[at : at + len(keyword)]
        if written.upper() != keyword:
            continue
        if written in (keyword, keyword.lower()) or (keyword in _NAMES and written == keyword.capitalize()):
            return written
    return None


def _ordinal(value_sql: str, upper: bool) -> str:
    suffixes = ("ST", "ND", "RD", "TH") if upper else ("st", "nd", "rd", "th")
    st, nd, rd, th = (_lit(s) for s in suffixes)
    v = f"({value_sql})"
    return (
        f"(CASE WHEN {v} % 100 BETWEEN 11 AND 13 THEN {th} WHEN {v} % 10 = 1 THEN {st} "
        f"WHEN {v} % 10 = 2 THEN {nd} WHEN {v} % 10 = 3 THEN {rd} ELSE {th} END)"
    )


def _piece(keyword: str, fill: bool) -> tuple[str, str | None]:
    """The DuckDB SQL of one keyword, and the numeric value a following TH would read."""
    key = keyword.upper()
    if key == _SPELL:
        return "''", None
    if key in _ZONES:
        return _ZONES["tz" if keyword == "tz" else key], None
    if key in _FRACTIONS:
        micros = f"lpad(CAST(microsecond({_TS}) % 1000000 AS VARCHAR), 6, '0')"
        return f"substr({micros}, 1, {_FRACTIONS[key]})", None
    if key == "FX":
        return "''", None
    if key == "Y,YYY":
        year = f"year({_TS})"
        thousands = f"lpad(CAST({year} % 1000 AS VARCHAR), 3, '0')"
        return f"(CAST({year} // 1000 AS VARCHAR) || ',' || {thousands})", year
    if key in _NUMBERS:
        number = _NUMBERS[key]
        text = f"CAST({number.sql} AS VARCHAR)"
        return (text if fill or number.width == 1 else f"lpad({text}, {number.width}, '0')"), number.sql
    if key in _NAMES:
        spec, width = _NAMES[key]
        name = f"strftime({_TS}, '{spec}')"
        if width and not fill:
            name = f"rpad({name}, {width}, ' ')"
        return _cased(name, keyword), None
    if key in _MERIDIEM or key in _ERAS:
        first, second = (_MERIDIEM if key in _MERIDIEM else _ERAS)[key]
        test = f"hour({_TS}) < 12" if key in _MERIDIEM else f"year({_TS}) > 0"
        if keyword.islower():
            first, second = first.lower(), second.lower()
        return f"(CASE WHEN {test} THEN {_lit(first)} ELSE {_lit(second)} END)", None
    # RM: the month in upper-case Roman numerals, padded to 4
    numerals = ", ".join(_lit(r if fill else r.ljust(4)) for r in _ROMAN)
    roman = f"[{numerals}][month({_TS})]"
    return (f"lower({roman})" if keyword == "rm" else roman), None


def _pieces(pattern: str) -> list[str]:
    """The DuckDB SQL pieces of a pattern, in order."""
    pieces: list[str] = []
    literal: list[str] = []
    at, fill = 0, False

    def flush() -> None:
        if literal:
            pieces.append(_lit("".join(literal)))
            literal.clear()

    while at < len(pattern):
        if pattern[at : at + 2].upper() == "FM":
            fill, at = True, at + 2
            continue
        if pattern[at : at + 2].upper() == "TM":  # translation mode: names are English anyway
            at += 2
            continue
        keyword = _match(pattern, at)
        if keyword is not None:
            flush()
            sql, value = _piece(keyword, fill)
            pieces.append(sql)
            at += len(keyword)
            suffix = pattern[at : at + 2]
            if value is not None and suffix in ("TH", "th"):
                pieces.append(_ordinal(value, suffix == "TH"))
                at += 2
            fill = False
            continue
        char = pattern[at]
        if char == '"':  # "literal text", with \" for a quote
            end = at + 1
            while end < len(pattern) and pattern[end] != '"':
                if pattern[end] == "\\" and end + 1 < len(pattern):
                    end += 1
                literal.append(pattern[end])
                end += 1
            at = end + 1
            continue
        if char == "\\" and at + 1 < len(pattern):
            literal.append(pattern[at + 1])
            at += 2
            continue
        literal.append(char)
        at += 1
    flush()
    return pieces


def to_char_time(value: exp.Expr, pattern: str, parse: Callable[[str], exp.Expr]) -> exp.Expr:
    """``to_char(value, pattern)`` for a timestamp, timestamptz or date ``value``, as a DuckDB
    expression (``parse`` reads DuckDB SQL). NULL for a NULL value, as PostgreSQL's strict function."""
    pieces = _pieces(pattern) or ["''"]
    sql = f"CASE WHEN {_TS} IS NULL THEN NULL ELSE {' || '.join(pieces)} END"

    def fill(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name == _TS:
            return value.copy()
        return node

    return parse(sql).transform(fill)


def zone_abbreviation(value: datetime, zone: str) -> str:
    """``pgs_tz_abbrev``: the abbreviation of a time's zone in the session's ``TimeZone`` (a checked
    name of the time zone database): ``CEST``, ``IST``, ``UTC``."""
    return value.astimezone(UTC if zone == "UTC" else ZoneInfo(zone)).tzname() or ""
