"""A Postgres mapping's options: its ``dsn`` (a PostgreSQL connection string) and its ``table``
(``[schema.]name``), each checked when the mapping is created, with messages that name it."""

from __future__ import annotations

from dataclasses import dataclass

from pitstop import dsn
from pitstop.errors import PlanError
from pitstop.names import check_name


@dataclass(frozen=True)
class TableRef:
    """``[schema.]name`` of the sink table; no schema: the connection's ``current_schema()``."""

    schema: str | None
    name: str

    def text(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


def parse_dsn(mapping: str, text: str) -> dict[str, str]:
    """The connection parameters of a DSN, or PlanError (masked) naming the mapping."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = {k: str(v) for k, v in conninfo_to_dict(text).items() if v is not None}
    except Exception as exc:  # noqa: BLE001 - psycopg.ProgrammingError, but any parse failure
        raise PlanError(
            f"mapping '{mapping}': option 'dsn' is not a PostgreSQL connection string "
            f"({dsn.mask(str(exc).strip())}); write postgresql://user@host:port/database"
        ) from None
    port = params.get("port", "5432")
    if not all(p.isdigit() for p in port.split(",")):
        raise PlanError(f"mapping '{mapping}': option 'dsn' has port '{port}'; a port is a number")
    return params


def table_ref(mapping: str, text: str) -> TableRef:
    """``'schema.name'`` or ``'name'``, each part a valid name (PlanError otherwise)."""
    parts = text.split(".")
    if len(parts) > 2:
        raise PlanError(f"mapping '{mapping}': option 'table' is '{text}'; write 'name' or 'schema.name'")
    for part in parts:
        check_name("sink table", part)
    return TableRef(parts[0], parts[1]) if len(parts) == 2 else TableRef(None, parts[0])
