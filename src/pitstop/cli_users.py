"""``pitstop user``: the users a server lets in (``<home>/users.json``; never catalog.duckdb, so
these commands work while a server runs)."""

from __future__ import annotations

import sys

import click

from pitstop.errors import PitstopError
from pitstop.server.auth import ROLES, UserStore
from pitstop.server.params import BY_NAME, InvalidValue, checked_setting, setting_name
from pitstop.settings import Settings


def _password(confirm: bool = True) -> str:
    """A hidden prompt (twice) on a terminal; otherwise the first line of stdin."""
    if sys.stdin.isatty():
        return str(click.prompt("Password", hide_input=True, confirmation_prompt=confirm))
    return sys.stdin.readline().rstrip("\r\n")


def _fail(err: PitstopError) -> None:
    click.echo(f"ERROR: {err}", err=True)
    sys.exit(1)


@click.group("user")
def users() -> None:
    """Users of `pitstop serve`: with none, only this machine may connect; with some, every client
    authenticates (SCRAM-SHA-256)."""


@users.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), default="reader", show_default=True)
@click.option("--md5", is_flag=True, help="also keep an md5 verifier, for old clients without SCRAM")
@click.pass_obj
def add(settings: Settings, name: str, role: str, md5: bool) -> None:
    """Add a user; the password comes from a prompt or the first line of stdin."""
    try:
        UserStore(settings.home).add(name, _password(), role, md5)
    except PitstopError as err:
        _fail(err)
    click.echo(f"user '{name}' added ({role})")


@users.command("passwd")
@click.argument("name")
@click.pass_obj
def passwd(settings: Settings, name: str) -> None:
    """Set a user's password (prompt or stdin)."""
    try:
        UserStore(settings.home).set_password(name, _password())
    except PitstopError as err:
        _fail(err)
    click.echo(f"password of user '{name}' changed")


@users.command("set")
@click.argument("name")
@click.argument("pairs", nargs=-1, required=True, metavar="SETTING=VALUE...")
@click.pass_obj
def set_settings(settings: Settings, name: str, pairs: tuple[str, ...]) -> None:
    """Session defaults of every session of a user, as PostgreSQL's ALTER ROLE ... SET:
    `pitstop user set rita statement_timeout=30s TimeZone=Europe/Paris`; `statement_timeout=`
    removes one. A client's startup options and its own SET still change them for its session."""
    changes: dict[str, str | None] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.UsageError(f"{pair}: expected SETTING=VALUE (an empty VALUE removes the setting)")
        try:
            canonical, checked = (
                checked_setting(key, value) if value else (BY_NAME[setting_name(key)].name, "")
            )
        except KeyError:
            raise click.UsageError(
                f'"{key}" is not a session parameter a user may be given (SHOW ALL lists them)'
            ) from None
        except InvalidValue as exc:
            raise click.UsageError(str(exc)) from None
        changes[canonical] = checked or None
    try:
        user = UserStore(settings.home).set_settings(name, changes)
    except PitstopError as err:
        _fail(err)
    shown = ", ".join(f"{k}={v}" for k, v in sorted(user.settings.items())) or "none"
    click.echo(f"session settings of user '{name}': {shown}")


@users.command("drop")
@click.argument("name")
@click.pass_obj
def drop(settings: Settings, name: str) -> None:
    """Remove a user (its open connections stay until they end)."""
    try:
        UserStore(settings.home).drop(name)
    except PitstopError as err:
        _fail(err)
    click.echo(f"user '{name}' dropped")


@users.command("list")
@click.pass_obj
def list_users(settings: Settings) -> None:
    """Name, role and authentication methods of each user (never a secret)."""
    for user in UserStore(settings.home).users():
        methods = "scram-sha-256" + (", md5" if user.md5 else "")
        defaults = " ".join(f"{k}={v}" for k, v in sorted(user.settings.items()))
        click.echo(f"{user.name}\t{user.role}\t{methods}" + (f"\t{defaults}" if defaults else ""))
