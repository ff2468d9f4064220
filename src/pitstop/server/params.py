"""PostgreSQL session parameters: what ``SHOW`` answers, what ``SET`` changes, and which ones a
client is told about (ParameterStatus) when they change.

pitstop answers them as a PostgreSQL 15 server in UTF-8 and UTC would, so that drivers that read
``server_version``, ``standard_conforming_strings`` or ``integer_datetimes`` on connect behave.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from functools import cache

from pitstop import __version__

SERVER_VERSION = "15.0"
SERVER_VERSION_NUM = "150000"
VERSION_TEXT = f"PostgreSQL {SERVER_VERSION} (pitstop {__version__}) on x86_64-pc-linux-gnu, 64-bit"


@dataclass(frozen=True)
class Parameter:
    name: str
    default: str
    description: str
    reported: bool = False
    """Sent to the client in a ParameterStatus message at start and whenever it changes."""
    fixed: bool = False
    """SET refuses another value (pitstop cannot honour it)."""


PARAMETERS: tuple[Parameter, ...] = (
    Parameter("server_version", SERVER_VERSION, "PostgreSQL version pitstop answers as", True, True),
    Parameter("server_version_num", SERVER_VERSION_NUM, "the same, as a number", False, True),
    Parameter("server_encoding", "UTF8", "server character set", True, True),
    Parameter("client_encoding", "UTF8", "client character set (pitstop speaks UTF8)", True),
    Parameter("DateStyle", "ISO, MDY", "date output style", True),
    Parameter("IntervalStyle", "postgres", "interval output style", True),
    Parameter("TimeZone", "UTC", "time zone in which timestamps with a zone are shown and computed", True),
    Parameter("integer_datetimes", "on", "timestamps are 64-bit integers", True, True),
    Parameter("standard_conforming_strings", "on", "backslashes are literal in '...'", True, True),
    Parameter("application_name", "", "the client's name", True),
    Parameter("is_superuser", "off", "whether the user is an admin", True, True),
    Parameter("session_authorization", "", "the connected user", True, True),
    Parameter("default_transaction_read_only", "off", "default read-only status of transactions", True),
    Parameter("in_hot_standby", "off", "whether the server is a standby", True, True),
    Parameter("transaction_isolation", "read committed", "isolation level of the transaction"),
    Parameter("default_transaction_isolation", "read committed", "default isolation level"),
    Parameter("transaction_read_only", "off", "whether the transaction is read-only"),
    Parameter("search_path", "public", "schema search order (sink tables are in public)"),
    Parameter("extra_float_digits", "1", "extra digits of floating-point output"),
    Parameter("max_identifier_length", "63", "longest identifier", False, True),
    Parameter("lc_collate", "C", "collation order", False, True),
    Parameter("lc_ctype", "C", "character classification", False, True),
    Parameter("lc_messages", "C", "language of messages"),
    Parameter("lc_monetary", "C", "monetary format"),
    Parameter("lc_numeric", "C", "number format"),
    Parameter("lc_time", "C", "time format"),
    Parameter("statement_timeout", "0", "longest a statement may run (0: no limit)"),
    Parameter("lock_timeout", "0", "longest a lock wait may last"),
    Parameter("idle_in_transaction_session_timeout", "0", "idle time allowed in a transaction"),
    Parameter("bytea_output", "hex", "output format of bytea"),
    Parameter("max_connections", "200", "most client connections at once", False, True),
    Parameter("block_size", "8192", "page size", False, True),
    Parameter("jit", "off", "just-in-time compilation"),
    Parameter("row_security", "on", "row security policies"),
    Parameter("synchronous_commit", "on", "commit waits for durability"),
    Parameter("ssl", "off", "whether TLS is configured", False, True),
)
BY_NAME = {p.name.lower(): p for p in PARAMETERS}
ALIASES = {
    "time zone": "timezone",
    "transaction isolation level": "transaction_isolation",
    "session authorization": "session_authorization",
    "names": "client_encoding",
}


def canonical(name: str) -> str:
    """``SHOW TIME ZONE`` -> ``timezone``; names are case-insensitive, as in PostgreSQL."""
    key = re.sub(r"\s+", " ", name.strip().strip('"')).lower()
    return ALIASES.get(key, key)


class InvalidValue(ValueError):
    """A value a parameter does not take (SQLSTATE 22023)."""


@cache
def _zone_names() -> dict[str, str]:
    """The time zone database's names, by their lower case (PostgreSQL reads them so); UTC even
    on a machine without the database."""
    return {name.lower(): name for name in zoneinfo.available_timezones()} | {"utc": "UTC"}


def time_zone(value: str) -> str:
    """A ``TimeZone`` setting as PostgreSQL names it (``asia/kolkata`` -> ``Asia/Kolkata``);
    ValueError for a value pitstop does not take: a name the time zone database lacks, or a
    POSIX or offset form (``+02:00``, ``UTC+2``, whose sign PostgreSQL reads the other way)."""
    name = _zone_names().get(value.strip().lower())
    if name is None:
        raise InvalidValue(
            f'invalid value for parameter "TimeZone": "{value}"; pitstop takes a name of the time '
            "zone database, such as 'UTC' or 'Europe/Paris'"
        )
    return name


def _command_line(options: str) -> list[tuple[str, str]]:
    """The settings of a startup packet's ``options`` (libpq's ``PGOPTIONS``): ``-c name=value``
    and ``--name=value``, separated by spaces (``\\ `` is a space inside a value), as PostgreSQL
    reads them; other switches are not settings and are left alone."""
    words = [w.replace("\\ ", " ") for w in re.split(r"(?<!\\) +", options.strip()) if w]
    out: list[tuple[str, str]] = []
    for i, word in enumerate(words):
        setting = words[i + 1] if word == "-c" and i + 1 < len(words) else None
        if word.startswith("--"):
            setting = word[2:]
        elif word.startswith("-c") and len(word) > 2:
            setting = word[2:]
        if setting is not None and "=" in setting:
            name, _, value = setting.partition("=")
            out.append((name.replace("-", "_"), value))
    return out


def setting_name(name: str) -> str:
    """The name of a parameter a user may be given a default of, as written in :data:`BY_NAME`'s
    keys; KeyError for any other name."""
    key = canonical(name)
    param = BY_NAME.get(key)
    if param is None or param.fixed or param.name in ("session_authorization", "is_superuser"):
        raise KeyError(name)
    return key


def checked_setting(name: str, value: str) -> tuple[str, str]:
    """A user's session default (``pitstop user set``) as its parameter names it, its value checked
    as SET checks it; KeyError for a name that is not a session parameter, InvalidValue for a
    value it does not take."""
    param = BY_NAME[setting_name(name)]
    if param.name == "TimeZone":
        value = time_zone(value)
    elif param.name == "statement_timeout":
        try:
            milliseconds(param.name, value)
        except ValueError as exc:
            raise InvalidValue(str(exc)) from None
    return param.name, value


class SessionParameters:
    """One client's parameters: the defaults, then its user's (``pitstop user set``), then the
    startup packet's, as PostgreSQL applies ``ALTER ROLE ... SET`` under a client's options."""

    def __init__(
        self,
        user: str,
        admin: bool,
        ssl: bool,
        startup: dict[str, str],
        defaults: dict[str, str] | None = None,
    ) -> None:
        self.values: dict[str, str] = {p.name.lower(): p.default for p in PARAMETERS}
        self.values["session_authorization"] = user
        self.values["is_superuser"] = "on" if admin else "off"
        self.values["ssl"] = "on" if ssl else "off"
        given = list((defaults or {}).items())  # the user's, under the client's
        given += [
            (k, v) for k, v in startup.items() if k not in ("user", "database", "options", "replication")
        ]
        given += _command_line(startup.get("options", ""))
        for key, value in given:
            param = BY_NAME.get(key.lower())
            if param is not None and not param.fixed:
                self.values[param.name.lower()] = time_zone(value) if param.name == "TimeZone" else value
            elif param is None:
                self.values[key.lower()] = value  # extension parameters are kept, as PostgreSQL does

    def show(self, name: str) -> tuple[str, str]:
        """``(column name, value)``; KeyError names an unknown parameter."""
        key = canonical(name)
        if key not in self.values:
            raise KeyError(key)
        param = BY_NAME.get(key)
        return (param.name if param else key), self.values[key]

    def set(self, name: str, value: str | None) -> Parameter | None:
        """Set (``None``: reset to default); returns the parameter when clients are told of it."""
        key = canonical(name)
        param = BY_NAME.get(key)
        if param is None:
            if "." not in key:
                raise KeyError(key)
            self.values[key] = value or ""  # custom "ext.name" parameters, as PostgreSQL allows
            return None
        new = param.default if value is None else value
        if param.name == "TimeZone":
            new = time_zone(new)
        if param.fixed and new != self.values[key]:
            raise ValueError(f'parameter "{param.name}" cannot be changed')
        self.values[key] = new
        return param if param.reported else None

    def reset_all(self) -> list[Parameter]:
        """RESET ALL: every parameter a session may change back to its default; returns the
        reported ones that changed (clients are told of them)."""
        changed = []
        for param in PARAMETERS:
            key = param.name.lower()
            if param.fixed or key in ("session_authorization", "is_superuser", "ssl"):
                continue
            if self.values[key] != param.default:
                self.values[key] = param.default
                if param.reported:
                    changed.append(param)
        return changed

    @property
    def zone(self) -> str:
        """The session's ``TimeZone``: timestamps with a zone are shown and computed in it."""
        return self.values["timezone"]

    def reported(self) -> list[tuple[str, str]]:
        return [(p.name, self.values[p.name.lower()]) for p in PARAMETERS if p.reported]

    def all(self) -> list[tuple[str, str, str]]:
        return [(p.name, self.values[p.name.lower()], p.description) for p in PARAMETERS]


_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def milliseconds(name: str, value: str) -> int:
    """A time setting as PostgreSQL reads it (``statement_timeout``): a number of milliseconds,
    or one with a unit (``us``, ``ms``, ``s``, ``min``, ``h``, ``d``); ValueError otherwise."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)?\s*", value.strip("'\""))
    if found is None:
        raise ValueError(
            f'invalid value for parameter "{name}": "{value}"'
            + '\nValid units for this parameter are "us", "ms", "s", "min", "h", and "d".'
        )
    return round(float(found.group(1)) * _UNITS_MS[found.group(2) or "ms"])
