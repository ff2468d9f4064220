"""Backslash commands, registered with :func:`special`: ``\\help``, ``\\jobs``, ``\\d name``,
``\\i file.sql``, ``\\watch n``, ``\\x``, ``\\timing``, ``\\format``, ``\\pager``, ``\\q`` ..."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pitstop.errors import PitstopError
from pitstop.executor import Result
from pitstop.shell.formatting import FORMATS, OutputOptions
from pitstop.shell.syntax import STATEMENTS, find_statement
from pitstop.spelling import closest

if TYPE_CHECKING:
    from pitstop.manager import Manager


class Shell(Protocol):
    """What a backslash command uses of the shell that runs it (:class:`pitstop.shell.app.Shell`)."""

    manager: Manager
    executor: Any
    output: OutputOptions
    timing: bool
    pager: bool
    last_sql: str | None
    interrupted: bool

    def run_sql(self, text: str, file: str | None = None) -> bool: ...

    def set_editing_mode(self, mode: str) -> None: ...

    def show(self, result: Result) -> None: ...

    def echo(self, text: str, page: bool = False) -> None: ...

    def warn(self, text: str) -> None: ...

    def error(self, err: PitstopError) -> None: ...


Handler = Callable[[Shell, str], None]


class ExitShell(Exception):
    """Raised by ``\\q`` to leave the loop."""


@dataclass(frozen=True)
class SpecialCommand:
    name: str
    args: str
    help: str
    handler: Handler
    aliases: tuple[str, ...] = ()


COMMANDS: dict[str, SpecialCommand] = {}


def special(
    name: str, args: str = "", help: str = "", aliases: tuple[str, ...] = ()
) -> Callable[[Handler], Handler]:
    """Register a backslash command: ``@special("\\\\jobs", help="list the jobs")``."""

    def register(handler: Handler) -> Handler:
        command = SpecialCommand(name, args, help, handler, aliases)
        for key in (name, *aliases):
            COMMANDS[key] = command
        return handler

    return register


def command_names() -> list[str]:
    return sorted(COMMANDS)


def run(shell: Shell, text: str) -> None:
    """Run one backslash command line, e.g. ``\\d orders``."""
    name, _, arg = text.strip().partition(" ")
    arg = arg.strip().rstrip(";").strip()
    command = COMMANDS.get(name.rstrip(";"))
    if command is None:
        close = closest(name, COMMANDS)
        hint = f"; did you mean {close[0]}?" if close else ""
        shell.warn(f"ERROR: unknown command {name}{hint} \\help lists the commands")
        return
    command.handler(shell, arg)


def _switch(value: str, current: bool) -> bool:
    """``on``/``off``, or nothing to toggle."""
    if value.lower() in ("on", "true", "1"):
        return True
    if value.lower() in ("off", "false", "0"):
        return False
    return not current


# -- help and leaving --------------------------------------------------------------------------
@special("\\q", help="quit (also quit, exit, Ctrl-D)", aliases=("\\quit",))
def _quit(shell: Shell, arg: str) -> None:
    raise ExitShell


@special("\\help", "[statement]", "statements and commands; the syntax of one statement", ("\\?", "\\h"))
def _help(shell: Shell, arg: str) -> None:
    if arg:
        stmt = find_statement(arg)
        if stmt is None:
            shell.warn(f"ERROR: no statement named {arg.upper()}; \\help lists them")
            return
        text = f"{stmt.name}: {stmt.summary}\n\n  {stmt.syntax}"
        if stmt.name == "CREATE MAPPING":
            from pitstop.connectors.registry import help_text

            text += "\n\n" + help_text()
        shell.echo(text)
        return
    width = max(len(s.name) for s in STATEMENTS)
    lines = ["Statements (end each with ';'; \\help NAME shows its syntax):"]
    lines += [f"  {s.name.ljust(width)}  {s.summary}" for s in STATEMENTS]
    lines.append("\nCommands:")
    seen = set()
    for command in COMMANDS.values():
        if command.name in seen:
            continue
        seen.add(command.name)
        usage = f"{command.name} {command.args}".strip()
        lines.append(f"  {usage.ljust(width)}  {command.help}")
    lines.append(
        "\nKeys: Enter runs a complete statement, Alt-Enter adds a line, Tab completes, "
        "Ctrl-C stops waiting for a statement, F4 switches emacs/vi keys, Ctrl-D quits."
    )
    shell.echo("\n".join(lines))


# -- the catalog -------------------------------------------------------------------------------
@special("\\jobs", help="list the jobs (SHOW JOBS)")
def _jobs(shell: Shell, arg: str) -> None:
    shell.run_sql("SHOW JOBS")


@special("\\snapshots", help="list the snapshots (SHOW SNAPSHOTS)")
def _snapshots(shell: Shell, arg: str) -> None:
    shell.run_sql("SHOW SNAPSHOTS")


@special("\\mappings", help="list the mappings (SHOW MAPPINGS)")
def _mappings(shell: Shell, arg: str) -> None:
    shell.run_sql("SHOW MAPPINGS")


@special("\\d", "[name]", "describe a mapping, job or snapshot; without a name, list every name")
def _describe(shell: Shell, arg: str) -> None:
    catalog = shell.manager.catalog
    if not arg:
        rows = [("mapping", m.name) for m in catalog.mappings()]
        rows += [("job", j.name) for j in catalog.jobs()]
        rows += [("snapshot", name) for name in catalog.snapshot_names()]
        shell.show(Result(f"{len(rows)} name(s)", ("kind", "name"), tuple(rows)))
        return
    if catalog.get_job(arg) is not None:
        _describe_with_statement(shell, f"DESCRIBE JOB {arg}", lambda: _job_fallback(shell, arg))
    elif catalog.get_snapshot(arg) is not None:
        _describe_with_statement(shell, f"DESCRIBE SNAPSHOT {arg}", lambda: _snapshot_fallback(shell, arg))
    elif catalog.get_mapping(arg) is not None:
        _describe_mapping(shell, arg)
    else:
        names = [m.name for m in catalog.mappings()] + [j.name for j in catalog.jobs()]
        names += catalog.snapshot_names()
        close = closest(arg, names)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        shell.warn(f"ERROR: no mapping, job or snapshot named '{arg}'{hint} \\d lists the names")


def _describe_with_statement(shell: Shell, sql: str, fallback: Callable[[], None]) -> None:
    """Run ``DESCRIBE ...`` when the executor knows it; otherwise describe from the catalog."""
    from pitstop.sql.parser import parse_script

    try:
        stmt = parse_script(sql)[0]
        result = shell.executor.execute(stmt)
    except PitstopError as err:
        if "not supported" in err.message:
            fallback()
        else:
            shell.error(err)
        return
    shell.show(result)


def _describe_mapping(shell: Shell, name: str) -> None:
    mapping = shell.manager.catalog.get_mapping(name)
    assert mapping is not None
    from pitstop.connectors.registry import display_name, find

    known = find(mapping.type)
    shown = known.shown_options(mapping.options) if known is not None else mapping.options
    options = ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))
    header = f"mapping '{mapping.name}': TYPE {display_name(mapping.type)}"
    if options:
        header += f" OPTIONS ({options})"
    if mapping.watermark is not None:
        header += (
            f"; WATERMARK FOR {mapping.watermark.column} AS {mapping.watermark.column} - "
            f"{mapping.watermark.delay_micros / 1e6:g} s"
        )
    shell.echo(header)
    rows = tuple((c.name, c.type) for c in mapping.columns)
    if rows:
        shell.show(Result("", ("column", "type"), rows))


def _job_fallback(shell: Shell, name: str) -> None:
    job = shell.manager.catalog.get_job(name)
    assert job is not None
    lines = [f"job '{job.name}': {job.status}" + (f" ({job.detail})" if job.detail else "")]
    if job.snapshot:
        lines.append(f"started from snapshot '{job.snapshot}'")
    lines.append(job.sql)
    shell.echo("\n".join(lines))


def _snapshot_fallback(shell: Shell, name: str) -> None:
    snap = shell.manager.catalog.get_snapshot(name)
    assert snap is not None
    shell.echo(
        f"snapshot '{snap.name}' of job '{snap.job}', taken {snap.created:%Y-%m-%d %H:%M:%S} UTC: "
        f"{snap.rows} state rows, {snap.size_bytes:,} bytes, in {snap.path}"
    )


# -- scripts and repetition --------------------------------------------------------------------
@special("\\i", "file.sql", "run the statements of a file (parsed whole first; stops at an error)")
def _include(shell: Shell, arg: str) -> None:
    if not arg:
        shell.warn("ERROR: \\i needs a file: \\i setup.sql")
        return
    path = Path(arg).expanduser()
    try:
        text = path.read_text()
    except OSError as exc:
        shell.warn(f"ERROR: cannot read {arg}: {exc.strerror or exc}")
        return
    shell.run_sql(text, file=arg)


@special("\\watch", "[seconds]", "run the last statement again every n seconds (default 2) until Ctrl-C")
def _watch(shell: Shell, arg: str) -> None:
    if shell.last_sql is None:
        shell.warn("ERROR: nothing to watch yet; run a statement first, then \\watch 2")
        return
    try:
        seconds = float(arg) if arg else 2.0
        if seconds <= 0:
            raise ValueError
    except ValueError:
        shell.warn(f"ERROR: \\watch takes a number of seconds greater than 0, not '{arg}'")
        return
    first = shell.last_sql.strip().split("\n", 1)[0]
    try:
        while True:
            shell.echo(f"{datetime.now():%H:%M:%S}  every {seconds:g} s: {first}  (Ctrl-C stops)")
            if not shell.run_sql(shell.last_sql) or shell.interrupted:
                return
            time.sleep(seconds)
    except KeyboardInterrupt:
        shell.echo("")


# -- output ------------------------------------------------------------------------------------
@special("\\x", "[on|off]", "expanded display: one 'column | value' line per field")
def _expanded(shell: Shell, arg: str) -> None:
    expanded = _switch(arg, shell.output.expanded)
    shell.output = OutputOptions(shell.output.fmt, expanded)
    shell.echo(f"Expanded display is {'on' if expanded else 'off'}.")


@special("\\timing", "[on|off]", "show how long each statement took")
def _timing(shell: Shell, arg: str) -> None:
    shell.timing = _switch(arg, shell.timing)
    shell.echo(f"Timing is {'on' if shell.timing else 'off'}.")


@special("\\format", "table|csv|json", "how result sets are printed")
def _format(shell: Shell, arg: str) -> None:
    if arg.lower() not in FORMATS:
        shell.warn(f"ERROR: \\format takes one of {', '.join(FORMATS)}; it is {shell.output.fmt}")
        return
    shell.output = OutputOptions(arg.lower(), shell.output.expanded)
    shell.echo(f"Output format is {arg.lower()}.")


@special("\\pager", "[on|off]", "page results longer than the terminal ($PAGER, default less)")
def _pager(shell: Shell, arg: str) -> None:
    shell.pager = _switch(arg, shell.pager)
    shell.echo(f"Pager is {'on' if shell.pager else 'off'}.")


@special("\\vi", help="vi editing keys (F4 switches)")
def _vi(shell: Shell, arg: str) -> None:
    shell.set_editing_mode("vi")
    shell.echo("Editing keys: vi.")


@special("\\emacs", help="emacs editing keys (F4 switches)")
def _emacs(shell: Shell, arg: str) -> None:
    shell.set_editing_mode("emacs")
    shell.echo("Editing keys: emacs.")
