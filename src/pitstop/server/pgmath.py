"""PostgreSQL's numeric functions ``sqrt``, ``exp``, ``ln``, ``log`` and ``power``, on numeric texts
(as :mod:`pitstop.server.pgnumeric`'s operators): DuckDB computes them in double precision, where
PostgreSQL gives a numeric of a scale it chooses from the value (``power(2.0, 0.5)`` is
``1.4142135623730950``, ``log(2, 8)`` is ``3.0000000000000000``).

Each result is the exact value rounded half away from zero at PostgreSQL's result scale, chosen
as PostgreSQL 15's numeric.c chooses it: at least 16 significant digits (NUMERIC_MIN_SIG_DIGITS)
by an estimate of the result's decimal weight, and not less than the operands' scales. The
estimates read the value's first base-10000 digits, as PostgreSQL's do, so that the scale is the
same where an estimate is off by one.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal, localcontext

from pitstop.server.pgnumeric import (
    MAX_DISPLAY_SCALE,
    MIN_SIG_DIGITS,
    NumericError,
    display_scale,
    numeric_out,
    parse_numeric,
)

__all__ = ["numeric_exp", "numeric_ln", "numeric_log", "numeric_power", "numeric_sqrt"]

_GUARD = 12
"""Digits computed beyond the result's, before it is rounded."""


def _digits(value: Decimal) -> tuple[int, list[int]]:
    """A non-zero value's weight and base-10000 digits, as PostgreSQL stores it (leading and
    trailing zero digits stripped): value = sum(d[i] * 10000 ** (weight - i))."""
    text = format(abs(value), "f")
    whole, _, fraction = text.partition(".")
    whole = whole.lstrip("0")
    whole = whole.zfill(-(-len(whole) // 4) * 4) if whole else ""
    fraction = fraction.ljust(-(-len(fraction) // 4) * 4, "0")
    chunks = [int(whole[i : i + 4]) for i in range(0, len(whole), 4)]
    chunks += [int(fraction[i : i + 4]) for i in range(0, len(fraction), 4)]
    weight = len(whole) // 4 - 1
    while chunks and chunks[0] == 0:
        chunks.pop(0)
        weight -= 1
    while chunks and chunks[-1] == 0:
        chunks.pop()
    return weight, chunks


def _clamp(scale: int) -> int:
    return min(max(scale, 0), MAX_DISPLAY_SCALE)


def _rounded(value: Decimal, scale: int) -> str:
    return numeric_out(value.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP), scale)


def _precision(value: Decimal, scale: int) -> int:
    """Significant digits to compute a result of about ``value``'s size to ``scale`` decimals."""
    size = value.adjusted() + 1 if value else 1
    return max(size, 1) + scale + _GUARD


def _ln_weight(value: Decimal) -> int:
    """PostgreSQL's estimate_ln_dweight: about log10(|ln(value)|), from the value's first digits."""
    if Decimal("0.9") <= value <= Decimal("1.1"):
        near_one = value - 1
        return near_one.adjusted() if near_one else 0  # ln(1 + x) ~= x
    weight, digits = _digits(value)
    if not digits:
        return 0
    first, decimal_weight = digits[0], weight * 4
    if len(digits) > 1:
        first, decimal_weight = first * 10000 + digits[1], decimal_weight - 4
    estimate = math.log(first) + decimal_weight * 2.302585092994046
    return int(math.log10(abs(estimate))) if estimate else 0


def numeric_sqrt(text: str) -> str:
    value = parse_numeric(text)
    if value < 0:
        raise NumericError("2201F", "cannot take square root of a negative number")
    weight = _digits(value)[0] if value else 0
    half_weight = int((weight + 1) * 4 / 2) - 1  # (C's division truncates toward zero)
    scale = _clamp(max(MIN_SIG_DIGITS - half_weight, display_scale(value)))
    with localcontext() as ctx:
        ctx.prec = _precision(value, scale) + 2
        return _rounded(value.sqrt(), scale)


_MAX_EXP = 6000
"""|x| from which exp(x) overflows (an error) or underflows (0): NUMERIC_MAX_RESULT_SCALE * 3."""


def _exp(power: Decimal, scale: int) -> str:
    """e ** power at ``scale`` decimals (PostgreSQL's exp_var)."""
    if power >= _MAX_EXP:
        raise NumericError("22003", "value overflows numeric format")
    if power <= -_MAX_EXP:
        return _rounded(Decimal(0), scale)
    with localcontext() as ctx:
        ctx.prec = max(int(float(power) * 0.434294481903252) + 2, 1) + scale + _GUARD
        return _rounded(power.exp(), scale)


def numeric_exp(text: str) -> str:
    value = parse_numeric(text)
    weight = max(min(float(value) * 0.434294481903252, 2000.0), -2000.0)
    scale = _clamp(max(MIN_SIG_DIGITS - int(weight), display_scale(value)))
    return _exp(value, scale)


def _check_log(value: Decimal) -> None:
    if value == 0:
        raise NumericError("2201E", "cannot take logarithm of zero")
    if value < 0:
        raise NumericError("2201E", "cannot take logarithm of a negative number")


def numeric_ln(text: str) -> str:
    value = parse_numeric(text)
    _check_log(value)
    scale = _clamp(max(MIN_SIG_DIGITS - _ln_weight(value), display_scale(value)))
    with localcontext() as ctx:
        ctx.prec = abs(value.adjusted()) + scale + _GUARD + 10
        return _rounded(value.ln(), scale)


def numeric_log(base_text: str, text: str) -> str:
    """``log(b, x)``: the logarithm of x in base b (``log(x)`` of a numeric is ``log(10, x)``)."""
    base, value = parse_numeric(base_text), parse_numeric(text)
    _check_log(base)
    _check_log(value)
    if base == 1:
        raise NumericError("22012", "division by zero")
    result_weight = _ln_weight(value) - _ln_weight(base)
    scale = _clamp(max(MIN_SIG_DIGITS - result_weight, display_scale(base), display_scale(value)))
    with localcontext() as ctx:
        ctx.prec = abs(base.adjusted()) + abs(value.adjusted()) + abs(result_weight) + scale + _GUARD + 10
        return _rounded(value.ln() / base.ln(), scale)


def numeric_power(base_text: str, exponent_text: str) -> str:
    base, exponent = parse_numeric(base_text), parse_numeric(exponent_text)
    integral = exponent == exponent.to_integral_value()
    if base == 0 and exponent < 0:
        raise NumericError("2201F", "zero raised to a negative power is undefined")
    if base < 0 and not integral:
        raise NumericError("2201F", "a negative number raised to a non-integer power yields a complex result")
    if integral and abs(exponent) < 2**31:
        return _power_int(base, int(exponent))
    if base == 0:
        return _rounded(Decimal(0), MIN_SIG_DIGITS)
    ln_weight = _ln_weight(base)
    rough_scale = _clamp(8 - ln_weight)
    with localcontext() as ctx:
        ctx.prec = abs(base.adjusted()) + rough_scale + 30
        rough_ln = base.ln().quantize(Decimal(1).scaleb(-rough_scale), rounding=ROUND_HALF_UP)
        rough = (rough_ln * exponent).quantize(Decimal(1).scaleb(-rough_scale), rounding=ROUND_HALF_UP)
    if abs(rough) > _MAX_EXP * Decimal("1.003"):  # PostgreSQL's crude test, a fuzz factor
        if rough > 0:
            raise NumericError("22003", "value overflows numeric format")
        return _rounded(Decimal(0), MAX_DISPLAY_SCALE)
    weight = int(float(rough) * 0.434294481903252)
    scale = _clamp(max(MIN_SIG_DIGITS - weight, display_scale(base), display_scale(exponent)))
    with localcontext() as ctx:
        ctx.prec = max(weight, 1) + scale + abs(base.adjusted()) + _GUARD + 10
        power = exponent * base.ln()
    return _exp(power, scale)


def _power_int(base: Decimal, exponent: int) -> str:
    """``power(x, n)`` of an integral n: PostgreSQL's power_var_int, at 16 decimals or the base's
    scale; 0 when an estimate of log10 of the result (by the base's first 16 digits) is below
    that scale."""
    scale = _clamp(max(MIN_SIG_DIGITS, display_scale(base)))
    if base == 0:
        return _rounded(Decimal(1 if exponent == 0 else 0), scale)
    weight, digits = _digits(base)
    first, power = float(digits[0]), weight * 4
    for digit in digits[1:4]:
        first, power = first * 10000 + digit, power - 4
    estimate = exponent * (math.log10(first) + power)
    if estimate > 32767 * 4 * 3:
        raise NumericError("22003", "value overflows numeric format")
    if exponent not in (0, 1, -1, 2) and estimate + 1 < -scale:
        return _rounded(Decimal(0), scale)
    with localcontext() as ctx:
        ctx.prec = max(int(estimate), 1) + scale + _GUARD + 10
        return _rounded(base**exponent, scale)
