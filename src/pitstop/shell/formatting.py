"""Results as text: aligned tables (cli_helpers), expanded records, csv and json lines."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from pitstop.executor import Result

FORMATS = ("table", "csv", "json")


@dataclass(frozen=True)
class OutputOptions:
    """How result sets are printed: ``fmt`` one of :data:`FORMATS`; ``expanded`` prints each row
    as a record of ``column | value`` lines (the shell's ``\\x``)."""

    fmt: str = "table"
    expanded: bool = False


def render(result: Result, fmt: str | OutputOptions = "table") -> str:
    """The text of a result: its message, or its rows in the chosen format."""
    options = fmt if isinstance(fmt, OutputOptions) else OutputOptions(fmt)
    if not result.has_rows:
        return result.message
    if options.fmt == "json":
        return "\n".join(
            json.dumps(dict(zip(result.columns, row, strict=True)), default=_json_default)
            for row in result.rows
        )
    from cli_helpers.tabular_output import TabularOutputFormatter

    if options.fmt == "csv":
        name = "csv"
    else:
        name = "vertical" if options.expanded else "psql"
    formatter = TabularOutputFormatter(format_name=name)
    rows = [[_cell(v) for v in row] for row in result.rows]
    text = "\n".join(formatter.format_output(rows, list(result.columns), disable_numparse=True))
    if options.fmt == "table":
        count = len(result.rows)
        text += f"\n({count} row{'s' if count != 1 else ''})"
    return text


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return str(value)  # Decimal keeps its scale as text: "15944.00"


def _cell(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds" if not value.microsecond else "auto")
    if isinstance(value, Decimal):
        return str(value)  # keep the scale: 15944.00, not 15944
    return value
