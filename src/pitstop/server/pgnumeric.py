"""PostgreSQL's ``numeric`` where DuckDB's DECIMAL cannot follow it: scalar functions that
:mod:`pitstop.server.pgsemantics` registers in DuckDB (once per database) and calls from the SQL it
generates.

PostgreSQL's unconstrained numeric gives each *value* its own display scale: ``'3.14159'::numeric``
keeps five decimals, and a quotient gets the scale ``select_div_scale`` picks from the operands'
magnitudes (``10::numeric / 4`` is ``2.5000000000000000``, ``1::numeric / 7`` has 20 decimals).
A DuckDB DECIMAL has one scale per column, so these values travel as their text, PostgreSQL's
own, computed here with :class:`decimal.Decimal` and exact integers after PostgreSQL's
``numeric.c``; the server sends such a column as numeric.

Errors carry their SQLSTATE in the message (``SQLSTATE 22012: division by zero``), which
:func:`pitstop.server.sqlstate.from_duckdb` reads back: DuckDB wraps a Python exception in its own.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext

__all__ = [
    "MAX_DISPLAY_SCALE",
    "MIN_SIG_DIGITS",
    "NumericError",
    "display_scale",
    "float_numeric",
    "float_text",
    "numeric_add",
    "numeric_div",
    "numeric_in",
    "numeric_mul",
    "numeric_out",
    "numeric_sub",
    "parse_numeric",
    "to_char_number",
]

MIN_SIG_DIGITS = 16  # NUMERIC_MIN_SIG_DIGITS
MAX_DISPLAY_SCALE = 1000  # NUMERIC_MAX_DISPLAY_SCALE
DBL_DIG = 15
_NUMBER = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*")
_SPECIAL = {"nan": "NaN", "infinity": "Infinity", "+infinity": "Infinity", "inf": "Infinity",
            "+inf": "Infinity", "-infinity": "-Infinity", "-inf": "-Infinity"}  # fmt: skip


class NumericError(ValueError):
    """A value PostgreSQL refuses; the message starts with its SQLSTATE."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"SQLSTATE {code}: {message}")


def parse_numeric(text: str) -> Decimal:
    """A numeric's text (PostgreSQL's or DuckDB's: digits, a point, no exponent) as a Decimal;
    NumericError (22P02) for what is not a number, (0A000) for NaN and the infinities, which
    pitstop does not compute with."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise NumericError("22P02", f'invalid input syntax for type numeric: "{text}"') from None
    if not value.is_finite():
        raise NumericError("0A000", f"pitstop cannot compute with the numeric {text}")
    return value


def numeric_out(value: Decimal, scale: int) -> str:
    """PostgreSQL's text of a numeric: ``scale`` decimals, never a minus zero."""
    text = format(value, "f")
    if value == 0:
        text = text.lstrip("-")
    return text if scale > 0 or "." not in text else text.split(".")[0]


def display_scale(value: Decimal) -> int:
    """A value's display scale: the decimals written (``Decimal("2.50")`` has 2, ``Decimal("1E+3")`` 0)."""
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    return max(0, -exponent)


def _weight_and_first(value: Decimal) -> tuple[int, int]:
    """The weight (power of 10000) of a value's first non-zero base-10000 digit, and that digit."""
    if value == 0:
        return 0, 0
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits)))
    leading = len(str(unscaled)) - 1 + exponent  # power of ten of the first digit
    weight = leading // 4
    shift = exponent - 4 * weight
    first = unscaled * 10**shift if shift >= 0 else unscaled // 10**-shift
    return weight, first


def division_scale(dividend: Decimal, divisor: Decimal) -> int:
    """``select_div_scale``: at least 16 significant digits, at least either operand's scale."""
    weight1, first1 = _weight_and_first(dividend)
    weight2, first2 = _weight_and_first(divisor)
    qweight = weight1 - weight2 - (1 if first1 <= first2 else 0)
    scale = max(MIN_SIG_DIGITS - qweight * 4, display_scale(dividend), display_scale(divisor), 0)
    return min(scale, MAX_DISPLAY_SCALE)


def numeric_div(dividend: str, divisor: str) -> str:
    """``numeric / numeric`` as PostgreSQL computes it: the quotient rounded half away from zero
    at :func:`division_scale`, as text. The operands are the texts of DECIMAL, integer or numeric
    values; their scale is the number of decimals written."""
    a, b = parse_numeric(dividend), parse_numeric(divisor)
    if b == 0:
        raise NumericError("22012", "division by zero")
    scale = division_scale(a, b)
    a_sign, a_digits, a_exp = a.as_tuple()
    b_sign, b_digits, b_exp = b.as_tuple()
    assert isinstance(a_exp, int) and isinstance(b_exp, int)
    num = int("".join(map(str, a_digits)))
    den = int("".join(map(str, b_digits)))
    shift = a_exp - b_exp + scale  # quotient * 10**scale = num / den * 10**shift
    if shift >= 0:
        num *= 10**shift
    else:
        den *= 10**-shift
    quotient = (2 * num + den) // (2 * den)  # half away from zero, on magnitudes
    negative = bool(a_sign) != bool(b_sign) and quotient != 0
    return numeric_out(Decimal((int(negative), tuple(map(int, str(quotient))), -scale)), scale)


def _exact(operation: str, left: str, right: str) -> str:
    a, b = parse_numeric(left), parse_numeric(right)
    scale = (
        display_scale(a) + display_scale(b) if operation == "*" else max(display_scale(a), display_scale(b))
    )
    with localcontext() as ctx:
        ctx.prec = 2 * (len(a.as_tuple().digits) + len(b.as_tuple().digits)) + 2 * scale + 10  # exact
        value = a * b if operation == "*" else a + b if operation == "+" else a - b
        value = value.quantize(Decimal(1).scaleb(-scale))
    return numeric_out(value, scale)


def numeric_mul(left: str, right: str) -> str:
    """``numeric * numeric`` as PostgreSQL computes it: exact, the sum of the operands' scales."""
    return _exact("*", left, right)


def numeric_add(left: str, right: str) -> str:
    """``numeric + numeric``: exact, the larger of the operands' scales."""
    return _exact("+", left, right)


def numeric_sub(left: str, right: str) -> str:
    """``numeric - numeric``: exact, the larger of the operands' scales."""
    return _exact("-", left, right)


def numeric_in(text: str) -> str:
    """``text::numeric`` (PostgreSQL's ``numeric_in``): the value with the scale it is written with."""
    special = _SPECIAL.get(text.strip().lower())
    if special is not None:
        return special
    if not _NUMBER.fullmatch(text):
        raise NumericError("22P02", f'invalid input syntax for type numeric: "{text}"')
    value = Decimal(text.strip())
    return numeric_out(value, display_scale(value))


def float_numeric(value: float) -> str:
    """``float8::numeric``: PostgreSQL keeps the 15 significant digits ``%.15g`` prints."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return numeric_in(f"{value:.{DBL_DIG}g}")


def float_text(value: float) -> str:
    """``float8::text``: PostgreSQL's float8out, the shortest digits that read back as the same
    double, in fixed notation for decimal exponents -4 to 14 (``100``, ``0.001``), else as
    ``1.5e-07`` / ``1e+15``; ``NaN``, ``Infinity``, ``-0``. (DuckDB's text is ``100.0``, ``inf``.)"""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    shortest = Decimal(repr(abs(value)))
    _, digit_tuple, exponent = shortest.as_tuple()
    assert isinstance(exponent, int)
    written = "".join(map(str, digit_tuple))
    digits = written.rstrip("0") or "0"
    adjusted = len(written) - 1 + exponent if value else 0
    if -4 <= adjusted < 15:
        text = format(shortest, "f")
        text = text.rstrip("0").rstrip(".") if "." in text else text
    else:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = f"{mantissa}e{'+' if adjusted >= 0 else '-'}{abs(adjusted):02d}"
    return sign + text


# -- to_char(number, pattern) ----------------------------------------------------------------------
_NUMBER_PATTERN = re.compile(r"FM|[90DG.,]", re.I)
NUMBER_PATTERN_HELP = "9, 0, D, G, '.', ',' and the FM prefix"


def is_number_pattern(pattern: str) -> bool:
    """Whether ``pattern`` is made only of the number patterns pitstop formats."""
    rest = _NUMBER_PATTERN.sub("", pattern)
    return rest == "" and any(c in pattern for c in "90")


def to_char_number(value: str, pattern: str, is_float: bool) -> str:
    """``to_char(number, pattern)`` for :func:`is_number_pattern` patterns, as PostgreSQL prints
    them: a sign position, 9 a digit or a blank, 0 a digit always, D/. the point, G/, a group
    separator (shown between printed digits), ``###`` when the number does not fit; with FM no
    padding and no trailing zeros where the pattern says 9."""
    if not is_number_pattern(pattern):
        raise NumericError("0A000", f'pitstop\'s to_char does not know the number pattern "{pattern}": '
                           f"it formats {NUMBER_PATTERN_HELP}")  # fmt: skip
    fill = "FM" in pattern.upper()
    body = re.sub("(?i)FM", "", pattern)
    point = next((i for i, c in enumerate(body) if c in "Dd."), len(body))
    int_part, frac_part = body[:point], body[point + 1 :]
    int_digits = [i for i, c in enumerate(int_part) if c in "90"]
    decimals = sum(c in "90" for c in frac_part)
    if is_float:
        number = float(value)
        rounded = Decimal(f"{abs(number):.{decimals}f}")
        negative = number < 0  # sprintf keeps the sign of a float that rounds to 0: '-0'
    else:
        exact = parse_numeric(value)
        with localcontext() as ctx:
            ctx.prec = len(exact.as_tuple().digits) + decimals + 2
            rounded = abs(exact).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
        negative = exact < 0 and rounded != 0
    whole, _, fraction = format(rounded, "f").partition(".")
    significant = whole.lstrip("0")
    if not significant and point == len(body):
        significant = "0"  # to_char(0, '999') is 0, to_char(0.5, '999D99') is .50
    if len(significant) > len(int_digits):  # too large: every digit position shows #
        text = "".join("#" if c in "90" else _separator(c) for c in int_part)
        if point < len(body):
            text += "." + "#" * decimals
        return text if fill else " " + text
    first_zero = next((n for n, i in enumerate(int_digits) if int_part[i] == "0"), len(int_digits))
    shown = max(len(significant), len(int_digits) - first_zero)
    padded = significant.rjust(len(int_digits), "0")
    start = int_digits[len(int_digits) - shown] if shown else len(int_part)
    out, digit = [], len(int_digits) - shown
    for c in int_part[start:]:
        if c in "90":
            out.append(padded[digit])
            digit += 1
        else:
            out.append(_separator(c))
    text = "".join(out)
    if point < len(body):
        if fill:
            places = [c for c in frac_part if c in "90"]
            keep = max((n + 1 for n, c in enumerate(places) if c == "0"), default=0)  # up to the last 0
            fraction = fraction[:keep] + fraction[keep:].rstrip("0")
        text += "." + fraction
    text = ("-" if negative else "") + text
    if fill:
        return text
    return text.rjust(1 + len(body))  # one position for the sign, one for each pattern letter


def _separator(c: str) -> str:
    return "," if c in "Gg," else c
