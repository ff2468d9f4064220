"""Every mapping type pitstop knows, by name: the one list dialect, planner, engine, snapshots
and shell consult (:mod:`pitstop.connectors.base` says what a type declares). A connector is one package,
``connectors/<type>/``, whose ``connector.py`` declares it; adding one is that package and one row
here."""

from __future__ import annotations

from pitstop.connectors.base import Connector
from pitstop.connectors.console import connector as console
from pitstop.connectors.duckdb import connector as duckdb
from pitstop.connectors.file import connector as file
from pitstop.connectors.generator import connector as generator
from pitstop.connectors.kafka import connector as kafka
from pitstop.connectors.postgres import connector as postgres
from pitstop.errors import PlanError

CONNECTORS: tuple[Connector, ...] = (
    file.CONNECTOR,
    duckdb.CONNECTOR,
    generator.CONNECTOR,
    console.CONNECTOR,
    kafka.CONNECTOR,
    postgres.CONNECTOR,
)
_BY_KEY = {c.key: c for c in CONNECTORS}

TYPE_NAMES: tuple[str, ...] = tuple(c.type_name for c in CONNECTORS)
SOURCE_TYPES: tuple[str, ...] = tuple(c.type_name for c in CONNECTORS if c.source)
SINK_TYPES: tuple[str, ...] = tuple(c.type_name for c in CONNECTORS if c.sink)


def find(type_text: str) -> Connector | None:
    """The connector of ``TYPE type_text`` (any case), or None."""
    return _BY_KEY.get(type_text.lower())


def connector(key: str) -> Connector:
    """The connector of a stored mapping's type; PlanError for a type this pitstop lacks (a
    catalog written by a newer pitstop)."""
    found = _BY_KEY.get(key.lower())
    if found is None:
        raise PlanError(
            f"mapping type '{key}' is unknown to this pitstop (known: {', '.join(TYPE_NAMES)}); "
            "was the home written by a newer version?"
        )
    return found


def display_name(key: str) -> str:
    """``File`` for ``file``; an unknown key as it is."""
    found = _BY_KEY.get(key.lower())
    return found.type_name if found is not None else key


def option_names() -> tuple[str, ...]:
    """Every declared option name of every type (for completion inside ``OPTIONS (``)."""
    return tuple(dict.fromkeys(o.name for c in CONNECTORS for o in c.options))


def help_text() -> str:
    """The mapping types and their options, from the declarations (``\\help CREATE MAPPING``)."""
    lines = ["Mapping types and their options:"]
    for c in CONNECTORS:
        lines.append(f"  TYPE {c.type_name} ({c.roles()}): {c.summary}")
        for o in c.options:
            default = f"; default {o.default}" if o.default is not None else ""
            required = "; required" if o.required else ""
            lines.append(f"    '{o.name}'  {o.help} ({o.accepts()}{default}{required})")
        if c.passthrough:
            lines.append(f"    other dotted names: {c.passthrough}")
        if not c.options:
            lines.append("    no options")
    return "\n".join(lines)


def readme_table() -> str:
    """The README's table of mapping types and options (a test keeps the README equal to it)."""
    rows = ["| type | role | option | takes | default | what it is |", "|---|---|---|---|---|---|"]
    for c in CONNECTORS:
        if not c.options:
            rows.append(f"| `{c.type_name}` | {c.roles()} | | | | {c.summary} |")
        for n, o in enumerate(c.options):
            first = f"`{c.type_name}` | {c.roles()}" if n == 0 else " | "
            default = "required" if o.required else (f"`{o.default}`" if o.default is not None else "")
            takes = o.accepts().replace("|", "\\|")
            rows.append(f"| {first} | `{o.name}` | {takes} | {default} | {o.help} |")
        if c.passthrough:
            rows.append(f"|  |  | any other `a.b` name | text | | {c.passthrough} |")
    return "\n".join(rows)
