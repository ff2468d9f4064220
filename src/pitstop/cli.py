"""The ``pitstop`` command: thin; parses arguments, runs statements, prints results and errors."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

import click

from pitstop.errors import PitstopError
from pitstop.executor import Executor, Result
from pitstop.settings import Settings
from pitstop.sql.parser import is_complete

FORMATS = ("table", "csv", "json")


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


def render(result: Result, fmt: str) -> str:
    if not result.has_rows:
        return result.message
    if fmt == "json":
        return "\n".join(
            json.dumps(dict(zip(result.columns, row, strict=True)), default=_json_default)
            for row in result.rows
        )
    from cli_helpers.tabular_output import TabularOutputFormatter

    formatter = TabularOutputFormatter(format_name="csv" if fmt == "csv" else "psql")
    rows = [[_cell(v) for v in row] for row in result.rows]
    text = "\n".join(formatter.format_output(rows, list(result.columns), disable_numparse=True))
    if fmt == "table":
        text += f"\n({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})"
    return text


def _cell(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds" if not value.microsecond else "auto")
    if isinstance(value, Decimal):
        return str(value)  # keep the scale: 15944.00, not 15944
    return value


def stdin_statements(stream: IO[str]) -> Iterator[str]:
    """Statements from a pipe as they complete, so that ``... | pitstop`` runs each statement as
    soon as its ';' arrives. Each chunk is padded with newlines to keep script line numbers."""
    buffer: list[str] = []
    consumed = 0  # lines of the stream before the buffer
    for line in stream:
        buffer.append(line)
        text = "".join(buffer)
        if is_complete(text):
            yield "\n" * consumed + text
            consumed += len(buffer)
            buffer = []
    rest = "".join(buffer)
    if rest.strip():
        yield "\n" * consumed + rest


def _exit(code: int) -> None:
    """Stop Spark and leave without the interpreter's teardown (the JVM gateway's threads would
    otherwise keep native objects alive and make the exit slow and noisy)."""
    from pitstop.engine.session import stop_session

    try:
        stop_session()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _error_text(err: PitstopError) -> str:
    return str(err) if err.line is not None else f"ERROR: {err}"


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


@click.group(invoke_without_command=True)
@click.option(
    "--home",
    envvar="PITSTOP_HOME",
    type=click.Path(file_okay=False),
    help="pitstop home folder (catalog, sink tables, checkpoints, snapshots). "
    "Default: $PITSTOP_HOME or ./pitstop-home",
)
@click.option("--master", envvar="PITSTOP_SPARK_MASTER", help="Spark master URL (default local[*])")
@click.option("--verbose", "-V", is_flag=True, help="log what pitstop does")
@click.version_option(package_name="pitstop")
@click.pass_context
def main(ctx: click.Context, home: str | None, master: str | None, verbose: bool) -> None:
    """pitstop: streaming jobs on Spark, updated from SQL without losing their state."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    ctx.obj = Settings.resolve(home, master)
    if ctx.invoked_subcommand is None:
        if sys.stdin.isatty():
            click.echo(ctx.get_help())
        else:
            ctx.invoke(run, file="-")


@main.command()
@click.argument("file", required=False)
@click.option("-c", "--command", "command", help="run this SQL instead of a file")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="how result sets are printed",
)
@click.pass_obj
def run(settings: Settings, file: str | None, command: str | None, fmt: str = "table") -> None:
    """Run the statements of FILE (or - for stdin, or -c SQL) in order; stop at the first error."""
    if command is not None and file is not None:
        raise click.UsageError("give a FILE or -c SQL, not both")
    if command is None and file is None:
        raise click.UsageError("give a FILE (or - for stdin) or -c SQL")
    chunks: Iterator[str]
    if command is not None:
        chunks, label = iter([command]), None
    elif file == "-":
        chunks, label = stdin_statements(sys.stdin), None
    else:
        path = Path(file or "")
        if not path.is_file():
            raise click.UsageError(f"no such file: {file}")
        chunks, label = iter([path.read_text()]), str(path)
    signal.signal(signal.SIGTERM, _terminate)
    from pitstop.engine.manager import Manager

    try:
        manager = Manager(settings)
    except PitstopError as err:
        click.echo(f"ERROR: {err}", err=True)
        sys.exit(1)
    failed = False
    try:
        executor = Executor(manager)
        for text in chunks:
            for _stmt, result in executor.run_script(text, label):
                click.echo(render(result, fmt))
    except PitstopError as err:
        click.echo(_error_text(err), err=True)
        failed = True
    finally:
        manager.close()
    _exit(1 if failed else 0)


@main.command()
@click.argument("files", nargs=-1, required=True)
@click.pass_obj
def check(settings: Settings, files: tuple[str, ...]) -> None:
    """Parse and plan FILES, in order, against the home's catalog; run and change nothing."""
    from pitstop.catalog.store import Catalog

    catalog = None
    db = settings.home / "catalog.duckdb"
    if db.exists():
        catalog = Catalog(db)
    errors = 0
    executor = Executor(None, catalog)  # one executor: later files see what earlier ones create
    for file in files:
        path = Path(file)
        if not path.is_file():
            click.echo(f"ERROR: no such file: {file}", err=True)
            errors += 1
            continue
        count = 0
        try:
            for _stmt, _result in executor.run_script(path.read_text(), str(path)):
                count += 1
        except PitstopError as err:
            click.echo(f"{file}: {_error_text(err)}", err=True)
            errors += 1
            continue
        click.echo(f"{file}: {count} statement(s) OK")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
