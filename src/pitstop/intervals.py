"""Interval literals: ``INTERVAL '24' HOUR`` <-> microseconds.

pitstop measures every window size, slide, gap, watermark delay and timeout in whole
microseconds (Spark's own resolution). :func:`interval_micros` reads the interval nodes that
sqlglot produces; :func:`format_interval` writes the canonical text back.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from pitstop.errors import SqlError

_MICROS_PER_UNIT: dict[str, int] = {
    "MICROSECOND": 1,
    "MILLISECOND": 1_000,
    "SECOND": 1_000_000,
    "MINUTE": 60_000_000,
    "HOUR": 3_600_000_000,
    "DAY": 86_400_000_000,
}

# Largest first: format_interval picks the largest unit that divides the value exactly.
_UNITS_LARGEST_FIRST = sorted(_MICROS_PER_UNIT.items(), key=lambda item: -item[1])

_SPAN = re.compile(r"\s*([+-]?\d+(?:\.\d+)?|[+-]?\.\d+)\s*([A-Za-z]+)\s*")

EXAMPLE = "INTERVAL '5' SECOND"


def unit_micros(unit: str) -> int | None:
    """Microseconds in one ``unit`` (``HOUR``, ``hours``, ...), or None for an unknown unit."""
    name = unit.upper()
    if name.endswith("S") and name[:-1] in _MICROS_PER_UNIT:
        name = name[:-1]
    return _MICROS_PER_UNIT.get(name)


def interval_micros(node: exp.Expr) -> int:
    """Microseconds of an interval node; SqlError unless it is a positive, exact interval.

    Accepts ``INTERVAL '24' HOUR``, ``INTERVAL '90' MINUTES``, ``INTERVAL '0.5' SECONDS``,
    ``INTERVAL '1 hour'``, ``INTERVAL '1 hour 30 minutes'`` and sums such as
    ``INTERVAL '1' HOUR '30' MINUTE``.
    """
    micros = _micros(node)
    if micros <= 0:
        raise SqlError(f"an interval must be positive, got {node.sql()}")
    return micros


def format_interval(micros: int) -> str:
    """Canonical text of a positive interval in its largest exact unit: ``INTERVAL '24' HOUR``."""
    if micros <= 0:
        raise ValueError(f"an interval must be positive, got {micros} microseconds")
    for unit, size in _UNITS_LARGEST_FIRST:
        if micros % size == 0:
            return f"INTERVAL '{micros // size}' {unit}"
    raise AssertionError("unreachable: MICROSECOND divides every integer")


def _micros(node: exp.Expr) -> int:
    if isinstance(node, exp.Add):
        return _micros(node.this) + _micros(node.expression)
    if not isinstance(node, exp.Interval) or not isinstance(node.this, exp.Literal):
        raise SqlError(f"expected an interval such as {EXAMPLE}, got {node.sql()}")

    text = node.this.name
    unit = node.args.get("unit")
    if unit is not None:
        return _span_micros(text, unit.name, node)

    spans = list(_SPAN.finditer(text))
    if not spans or "".join(span.group(0) for span in spans) != text:
        raise SqlError(f"malformed interval {node.sql()}: write it as {EXAMPLE}")
    return sum(_span_micros(span.group(1), span.group(2), node) for span in spans)


def _span_micros(value: str, unit: str, node: exp.Expr) -> int:
    size = unit_micros(unit)
    if size is None:
        known = ", ".join(_MICROS_PER_UNIT)
        raise SqlError(f"unknown interval unit {unit!r} in {node.sql()}; use one of {known}")
    try:
        amount = Decimal(value.strip())
    except InvalidOperation:
        raise SqlError(f"malformed interval {node.sql()}: write it as {EXAMPLE}") from None
    if not amount.is_finite():
        raise SqlError(f"malformed interval {node.sql()}: write it as {EXAMPLE}")
    micros = amount * size
    if micros != micros.to_integral_value():
        raise SqlError(f"interval {node.sql()} is finer than a microsecond")
    return int(micros)


def text_micros(text: str) -> int | None:
    """Microseconds of an interval written as an option's value (``'5 minutes'``, ``'30 seconds'``,
    ``'1 hour 30 minutes'``, ``'0.5 seconds'``; units as in ``INTERVAL '...'``); None unless it is
    such a text, positive and exact to the microsecond."""
    spans = list(_SPAN.finditer(text))
    if not spans or "".join(span.group(0) for span in spans) != text:
        return None
    total = 0
    for span in spans:
        size = unit_micros(span.group(2))
        if size is None:
            return None
        try:
            amount = Decimal(span.group(1)) * size
        except InvalidOperation:
            return None
        if not amount.is_finite() or amount != amount.to_integral_value():
            return None
        total += int(amount)
    return total if total > 0 else None


def interval_words(micros: int) -> str:
    """A positive interval in words, in its largest exact unit: ``5 minutes``, ``1 second``."""
    for unit, size in _UNITS_LARGEST_FIRST:
        if micros % size == 0:
            n = micros // size
            return f"{n:,} {unit.lower()}{'' if n == 1 else 's'}"
    raise AssertionError("unreachable: MICROSECOND divides every integer")
