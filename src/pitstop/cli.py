"""The ``pitstop`` command: thin; parses arguments, runs statements, prints results and errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

import click

from pitstop import logs
from pitstop.driver import Driver, parse_variables
from pitstop.errors import PitstopError
from pitstop.executor import Executor
from pitstop.settings import Settings
from pitstop.shell.formatting import FORMATS, OutputOptions, render
from pitstop.shell.script import ON_ERROR, ScriptOptions, ScriptRunner
from pitstop.sql.parser import is_complete

__all__ = ["main", "render", "stdin_statements"]


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


def _leave(code: object) -> NoReturn:
    """End the ``pitstop`` process with ``code`` (``SystemExit.code``): stop Spark, flush, and
    leave through ``os._exit``, without the interpreter's teardown.

    Once Spark has run, Py4J's gateway and its callback server (the Python side of foreachBatch)
    hold threads that are not daemons and keep native objects alive; the interpreter's teardown
    beside them is slow and noisy (after a job, Spark stopped first, it took 1.3 s on 2 cores).
    Only the real process ends here (:meth:`_Program.__call__`); the commands end by raising
    ``SystemExit``, so that a test process can run them in itself and keep its one Spark session."""
    if code is None:
        code = 0
    elif not isinstance(code, int):  # as the interpreter does with sys.exit("message")
        print(code, file=sys.stderr)
        code = 1
    session = sys.modules.get("pitstop.engine.session")  # not imported: Spark never started
    try:
        if session is not None:
            session.stop_session()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class _Program(click.Group):
    """The ``pitstop`` group. Called as a program (``main()``: the ``pitstop`` script and
    ``python -m pitstop.cli``), it ends the process through :func:`_leave` once its command has
    ended. ``main.main([...])``, which click's ``CliRunner`` calls, returns or raises
    ``SystemExit`` as any click command does."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.main(*args, **kwargs)
        except SystemExit as done:
            _leave(done.code)


def _error_text(err: PitstopError) -> str:
    return str(err) if err.line is not None else f"ERROR: {err}"


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


@click.group(cls=_Program, invoke_without_command=True)
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
    logs.terminal(verbose)
    try:
        ctx.obj = Settings.resolve(home, master)
    except PitstopError as err:
        click.echo(f"ERROR: {err}", err=True)
        sys.exit(2)
    if ctx.invoked_subcommand is None:
        if sys.stdin.isatty() and sys.stdout.isatty():
            ctx.invoke(shell)
        else:
            ctx.invoke(run, file="-", connect=os.environ.get("PITSTOP_CONNECT"))


CONNECT = click.option(
    "--connect",
    envvar="PITSTOP_CONNECT",
    metavar="URL",
    help="run against a pitstop server (postgresql://user@host:5433/pitstop) instead of a home; "
    "without it, a server that holds --home is used when one runs",
)


def _server_url(settings: Settings, connect: str | None) -> str | None:
    """Where statements go: --connect, else the server holding the home (if one runs)."""
    if connect:
        return connect
    from pitstop.server.address import running_server

    address = running_server(settings.home)
    return None if address is None else address.url()


def _open_remote(url: str, prompt: bool) -> Any:
    from pitstop.remote import RemoteManager

    try:
        return RemoteManager(url, prompt)
    except PitstopError as err:
        click.echo(f"ERROR: {err}", err=True)
        sys.exit(1)


def _open_manager(settings: Settings) -> Any:
    from pitstop.manager import Manager

    try:
        manager = Manager(settings)
    except PitstopError as err:
        click.echo(f"ERROR: {err}", err=True)
        sys.exit(1)
    logs.to_home(settings.home)  # the home exists now
    return manager


@main.command()
@click.argument("file", required=False)
@click.option("-c", "--command", "command", help="run this SQL instead of a file")
@CONNECT
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="how result sets are printed",
)
@click.option("--echo", is_flag=True, help="print each statement before its result")
@click.option(
    "--on-error",
    type=click.Choice(ON_ERROR),
    default="stop",
    show_default=True,
    help="stop at the first failed statement, or report it and continue with the next",
)
@click.option(
    "-v",
    "--var",
    "variables",
    multiple=True,
    metavar="NAME=VALUE",
    help="substitute VALUE for ${NAME} in the script (repeatable)",
)
@click.pass_obj
def run(
    settings: Settings,
    file: str | None,
    command: str | None,
    fmt: str = "table",
    echo: bool = False,
    on_error: str = "stop",
    variables: tuple[str, ...] = (),
    connect: str | None = None,
) -> None:
    """Run the statements of FILE (or - for stdin, or -c SQL) in order.

    The exit status is 0 only when every statement succeeded. A FILE is parsed whole before
    anything runs (with --on-error stop); stdin runs each statement as its ';' arrives.
    """
    if command is not None and file is not None:
        raise click.UsageError("give a FILE or -c SQL, not both")
    if command is None and file is None:
        raise click.UsageError("give a FILE (or - for stdin) or -c SQL")
    try:
        values = parse_variables(variables)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
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
    url = _server_url(settings, connect)
    manager = _open_remote(url, sys.stdin.isatty()) if url else _open_manager(settings)
    executor = manager.executor() if url else Executor(manager)
    options = ScriptOptions(OutputOptions(fmt), echo, on_error, values)
    ok = False
    try:
        runner = ScriptRunner(executor, options, out=click.echo, err=lambda text: click.echo(text, err=True))
        ok = runner.run(chunks, label)
    finally:
        manager.close()
    sys.exit(0 if ok else 1)


@main.command()
@click.option("--vi", is_flag=True, help="vi editing keys (default: emacs)")
@CONNECT
@click.option(
    "--history",
    envvar="PITSTOP_HISTORY",
    type=click.Path(dir_okay=False),
    help="history file (default: pitstop's folder in the user data directory)",
)
@click.pass_obj
def shell(
    settings: Settings, vi: bool = False, history: str | None = None, connect: str | None = None
) -> None:
    """The interactive SQL shell (what plain `pitstop` opens on a terminal)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        click.get_current_context().invoke(run, file="-", connect=connect)
        return
    from pitstop.shell.app import Shell

    signal.signal(signal.SIGTERM, _terminate)
    url = _server_url(settings, connect)
    manager = _open_remote(url, True) if url else _open_manager(settings)
    code = 1
    try:
        executor = manager.executor() if url else None
        code = Shell(manager, vi=vi, history=history, executor=executor).loop()
    finally:
        manager.close()
    sys.exit(code)


@main.command()
@click.option(
    "--host", envvar="PITSTOP_HOST", default="127.0.0.1", show_default=True, help="address to listen on"
)
@click.option("--port", envvar="PITSTOP_PORT", default=5433, show_default=True, type=int, help="TCP port")
@click.option(
    "--tls-cert",
    envvar="PITSTOP_TLS_CERT",
    type=click.Path(dir_okay=False, exists=True),
    help="PEM certificate (chain): clients may then ask for TLS (sslmode=require)",
)
@click.option(
    "--tls-key",
    envvar="PITSTOP_TLS_KEY",
    type=click.Path(dir_okay=False, exists=True),
    help="PEM private key of --tls-cert (when not in the same file)",
)
@click.option(
    "--require-tls",
    envvar="PITSTOP_REQUIRE_TLS",
    is_flag=True,
    help="refuse clients that do not ask for TLS (PostgreSQL's hostssl); needs --tls-cert",
)
@click.option(
    "--master",
    metavar="URL",
    help="Spark master URL, e.g. spark://host:7077 (same as pitstop --master; default local[*]); "
    "on a cluster the server connects and checks it before it listens",
)
@click.option(
    "--metrics-port",
    envvar="PITSTOP_METRICS_PORT",
    type=click.IntRange(0, 65535),
    help="serve the jobs' metrics for Prometheus at http://HOST:PORT/metrics (off unless given; "
    "0 picks a free port)",
)
@click.option(
    "--metrics-host",
    envvar="PITSTOP_METRICS_HOST",
    default="127.0.0.1",
    show_default=True,
    help="address the metrics endpoint listens on",
)
@click.pass_obj
def serve(
    settings: Settings,
    host: str,
    port: int,
    tls_cert: str | None,
    tls_key: str | None,
    require_tls: bool = False,
    master: str | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> None:
    """Run the manager as a server: jobs run until it stops; BI tools, psql and
    `pitstop --connect` reach it over the PostgreSQL protocol. SIGTERM or Ctrl-C stops every job at
    a batch boundary (they resume at the next start) and exits 0."""
    from dataclasses import replace

    from pitstop.server.main import serve as run_server

    if master:
        settings = replace(settings, master=master.strip())

    try:
        code = run_server(
            settings,
            host,
            port,
            tls_cert,
            tls_key,
            announce=click.echo,
            require_tls=require_tls,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
        )
    except PitstopError as err:
        click.echo(f"ERROR: {err}", err=True)
        sys.exit(1)
    sys.exit(code)


@main.command()
@click.argument("files", nargs=-1, required=True)
@CONNECT
@click.pass_obj
def check(settings: Settings, files: tuple[str, ...], connect: str | None = None) -> None:
    """Parse and plan FILES, in order, against the home's catalog (or the server's that holds it);
    report every error; run and change nothing.

    The home is only read: its catalog is opened read-only and never upgraded, and a home that
    does not exist is not created (the files are then checked against an empty catalog)."""
    from pitstop.catalog.store import Catalog

    catalog: Any = None
    local: Catalog | None = None
    url = _server_url(settings, connect)
    db = settings.home / "catalog.duckdb"
    if url:
        catalog = _open_remote(url, sys.stdin.isatty()).catalog  # read-only reads of its catalog
    elif db.exists():
        # A process holding the home without a server (pitstop run, shell) has DuckDB's write
        # lock, and DuckDB refuses a read-only open beside it: that is reported, not waited for.
        try:
            catalog = local = Catalog(db, read_only=True)
        except PitstopError as refused:
            click.echo(f"ERROR: {refused}", err=True)
            sys.exit(1)
    errors = 0
    checker = Driver(Executor(None, catalog))  # one executor: later files see what earlier ones create
    try:
        for file in files:
            path = Path(file)
            if not path.is_file():
                click.echo(f"ERROR: no such file: {file}", err=True)
                errors += 1
                continue
            count, found = checker.check(path.read_text(), str(path))
            for err in found:
                click.echo(f"{file}: {_error_text(err)}", err=True)
            errors += len(found)
            if found:
                click.echo(f"{file}: {count} statement(s) OK, {len(found)} error(s)")
            else:
                click.echo(f"{file}: {count} statement(s) OK")
    finally:
        if local is not None:
            local.close()
    sys.exit(1 if errors else 0)


@main.command("test")
@click.argument("file")
@click.option("--snapshot", help="replay from this snapshot (default: the FROM SNAPSHOT of FILE's job)")
@click.option("--until", help="replay up to this later snapshot (default: where the job stands now)")
@click.option(
    "--expect",
    type=click.Choice(("same", "changes")),
    default="same",
    show_default=True,
    help="same: every sink as the job's own SQL writes it; changes: some sink differs",
)
@CONNECT
@click.pass_obj
def test_job(
    settings: Settings,
    file: str,
    snapshot: str | None = None,
    until: str | None = None,
    expect: str = "same",
    connect: str | None = None,
) -> None:
    """Replay the job of FILE (one CREATE JOB statement) from a snapshot and diff what it writes
    against what the job's own SQL writes over the same input: EXPLAIN ANALYZE CREATE JOB. Exits
    0 when the outcome is the one --expect names, 1 when it is not, 2 on an error, 3 when it is
    the one named but inconclusive: part of the input is no longer held, or the job's own SQL,
    replayed, does not write what the job wrote (nothing is started, no sink written, in any
    case)."""
    from pitstop.sql.explain import analyze_statement

    path = Path(file)
    if not path.is_file():
        raise click.UsageError(f"no such file: {file}")
    try:
        sql = analyze_statement(path.read_text(), str(path), snapshot, until)
    except PitstopError as err:
        click.echo(_error_text(err), err=True)
        sys.exit(2)
    signal.signal(signal.SIGTERM, _terminate)
    url = _server_url(settings, connect)
    manager = _open_remote(url, sys.stdin.isatty()) if url else _open_manager(settings)
    executor = manager.executor() if url else Executor(manager)
    try:
        from pitstop.sql.parser import parse_script

        result = executor.execute(parse_script(sql, str(path))[0])
    except PitstopError as err:
        click.echo(_error_text(err), err=True)
        manager.close()
        sys.exit(2)
    manager.close()
    click.echo(render(result, OutputOptions("table")))
    click.echo(result.message)
    outcomes = {row[7] for row in result.rows}
    differs = bool(outcomes & {"differs", "state differs"})
    if differs != (expect == "changes"):
        sys.exit(1)
    # The expected outcome, over less than the whole span or beside a sink the job's own SQL
    # does not reproduce: not a pass, not a failure either (a CI step may choose to accept it).
    incomplete = [
        why
        for outcome, why in (
            ("not replayed", "part of the input is no longer held (see 'not replayed')"),
            (
                "not reproduced",
                "the job's own SQL, replayed, does not write what the job wrote (see 'not reproduced')",
            ),
        )
        if outcome in outcomes
    ]
    if incomplete:
        click.echo(
            f"inconclusive: the outcome is the one expected ({expect}), but {'; and '.join(incomplete)}",
            err=True,
        )
        sys.exit(3)
    sys.exit(0)


@main.command()
@click.option("--force", is_flag=True, help="record the archive again even if it exists")
def prepare(force: bool = False) -> None:
    """Record Spark's JVM classes once, so that every later start of Spark on this machine takes
    about a third less CPU (a class-data archive in the user's cache folder, ~50 s to make;
    `make` runs it). Nothing else changes: without it, Spark starts as before. Archives made for
    a pyspark that is no longer there (a virtual environment removed) are removed."""
    from pitstop import prepare as preparing
    from pitstop.engine import jvm

    for stale in jvm.remove_stale():
        click.echo(f"removed {stale}: made for a pyspark that is no longer installed")
    existing = jvm.archive_path()
    if force or existing is None or not existing.is_file():
        click.echo("recording the classes Spark's JVM loads (a job and two pit stops in a scratch home)...")
    try:
        path, made = preparing.prepare(force)
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        click.echo(f"ERROR: no class archive made: {err}", err=True)
        sys.exit(1)
    size = path.stat().st_size / 2**20
    click.echo(f"{'made' if made else 'already made'}: {path} ({size:.0f} MB)")


from pitstop.cli_users import users  # noqa: E402 - the group above must exist first

main.add_command(users)

if __name__ == "__main__":
    main()
