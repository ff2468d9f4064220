"""``pitstop user``: the users a server lets in (``<home>/users.json``; never catalog.duckdb, so
these commands work while a server runs)."""

from __future__ import annotations

import sys

import click

from pitstop.errors import PitstopError
from pitstop.server.auth import ROLES, UserStore
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
        click.echo(f"{user.name}\t{user.role}\t{methods}")
