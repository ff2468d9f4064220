""":class:`PgCatalog`, the catalog emulation as a server's sessions use it: each DuckDB cursor a
client's queries run on is prepared with four macros (the user, the backend's process id and
key, the session's settings), and each query is translated (:mod:`.translation`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import duckdb

from pitstop.server import pgsemantics
from pitstop.server.pgcatalog.oids import OWNER
from pitstop.server.pgcatalog.relation import lit
from pitstop.server.pgcatalog.translation import translate, translate_query


def _settings_macro(settings: Mapping[str, str]) -> str:
    pairs = ", ".join(f"{lit(name.lower())}: {lit(value)}" for name, value in settings.items())
    return f"CREATE OR REPLACE TEMP MACRO pgc_settings() AS CAST(MAP {{{pairs}}} AS MAP(VARCHAR, VARCHAR))"


class PgCatalog:
    """The catalog emulation of one server: shared by its sessions, safe from any thread.

    ``backend_key`` gives a session's key, by its process id, for ``pg_stat_activity`` and
    ``pg_cancel_backend`` (:mod:`pitstop.server.activity`); without it, sessions have none."""

    def __init__(self, backend_key: Callable[[int], str] | None = None) -> None:
        self.backend_key = backend_key

    def prepare(
        self,
        cursor: duckdb.DuckDBPyConnection,
        user: str = OWNER,
        backend_pid: int = 0,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        """Set up a fresh client cursor: the connection's user, process id (``pg_backend_pid()``),
        key (``pgc_backend_key()``) and session settings (``current_setting()``, ``pg_settings``)
        as four macros (~1 ms)."""
        key = self.backend_key(backend_pid) if self.backend_key is not None else ""
        cursor.execute(
            f"CREATE OR REPLACE TEMP MACRO pgc_user() AS {lit(user)}; "
            f"CREATE OR REPLACE TEMP MACRO pgc_backend_pid() AS CAST({int(backend_pid)} AS INTEGER); "
            f"CREATE OR REPLACE TEMP MACRO pgc_backend_key() AS {lit(key)}; "
            + _settings_macro(settings or {})
        )

    def set_parameters(self, cursor: duckdb.DuckDBPyConnection, settings: Mapping[str, str]) -> None:
        """The session's settings changed (SET, RESET): ``current_setting()`` and ``pg_settings``
        answer ``settings`` from now on, pitstop's defaults for any other name. Not inside a
        read-only transaction."""
        cursor.execute(_settings_macro(settings))

    def translate(self, sql: str) -> str:
        """One PostgreSQL statement (a SELECT / WITH / VALUES) -> DuckDB SQL for a prepared cursor."""
        return translate(sql)

    def translate_query(
        self, sql: str, schema: pgsemantics.Schema, parameters: tuple[str | None, ...] = ()
    ) -> pgsemantics.Translation:
        """:meth:`translate`, typed by the sink tables' ``schema`` and its ``parameters``' types
        (``DECIMAL``...), with what its result columns are."""
        return translate_query(sql, schema, parameters)
