"""Drive real Python clients against a PostgreSQL-speaking server; each action is labelled by
SET application_name = 'h1/<client>/<action>' so the server log can be split per action."""

from __future__ import annotations

import asyncio
import sys

PORT = int(sys.argv[1])
WHICH = sys.argv[2:] or ["psycopg", "asyncpg", "sqlalchemy", "pandas"]
DSN = f"postgresql://pitstop@127.0.0.1:{PORT}/pitstop"
results: dict[str, object] = {}


def psycopg_client() -> None:
    import psycopg

    with psycopg.connect(DSN, application_name="h1/psycopg/connect") as conn:
        conn.execute("SET application_name = 'h1/psycopg/query'")
        rows = conn.execute(
            "SELECT region, revenue, orders FROM daily_revenue WHERE orders > %s ORDER BY region", [1]
        ).fetchall()
        results["psycopg"] = rows
        conn.commit()
        conn.execute("SET application_name = 'h1/psycopg/type-info'")
        from psycopg.types import TypeInfo

        results["psycopg.typeinfo"] = TypeInfo.fetch(conn, "numeric")


async def asyncpg_client() -> None:
    import asyncpg

    conn = await asyncpg.connect(DSN, server_settings={"application_name": "h1/asyncpg/connect"})
    await conn.execute("SET application_name = 'h1/asyncpg/fetch-param'")
    rows = await conn.fetch(
        "SELECT region, revenue, orders, window_start FROM daily_revenue WHERE orders > $1", 1
    )
    results["asyncpg"] = [tuple(r) for r in rows]
    await conn.execute("SET application_name = 'h1/asyncpg/type-introspection'")
    # a column of a type asyncpg does not know by OID makes it introspect (json is known, so use
    # arrays of numeric and an interval to trigger its type query)
    rows = await conn.fetch(
        "SELECT ARRAY[revenue] AS revs, window_end - window_start AS span FROM daily_revenue"
    )
    results["asyncpg.introspect"] = [tuple(r) for r in rows]
    await conn.execute("SET application_name = 'h1/asyncpg/prepare'")
    stmt = await conn.prepare("SELECT * FROM daily_revenue WHERE region = $1")
    results["asyncpg.prepare"] = [tuple(r) for r in await stmt.fetch("eu")]
    await conn.close()


def sqlalchemy_client() -> None:
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(
        f"postgresql+psycopg://pitstop@127.0.0.1:{PORT}/pitstop",
        connect_args={"application_name": "h1/sqlalchemy/connect"},
    )
    with engine.connect() as conn:
        conn.execute(text("SET application_name = 'h1/sqlalchemy/inspect'"))
        insp = inspect(conn)
        out = {}
        for label, call in [
            ("get_schema_names", lambda: insp.get_schema_names()),
            ("get_table_names", lambda: insp.get_table_names()),
            ("get_table_names_pitstop", lambda: insp.get_table_names(schema="pitstop")),
            ("get_view_names", lambda: insp.get_view_names()),
            ("has_table", lambda: insp.has_table("daily_revenue")),
            ("get_columns", lambda: insp.get_columns("daily_revenue")),
            ("get_pk_constraint", lambda: insp.get_pk_constraint("daily_revenue")),
            ("get_pk_constraint_jobs", lambda: insp.get_pk_constraint("jobs", schema="pitstop")),
            ("get_foreign_keys", lambda: insp.get_foreign_keys("daily_revenue")),
            ("get_indexes", lambda: insp.get_indexes("daily_revenue")),
            ("get_unique_constraints", lambda: insp.get_unique_constraints("daily_revenue")),
            ("get_table_comment", lambda: insp.get_table_comment("daily_revenue")),
            ("get_check_constraints", lambda: insp.get_check_constraints("daily_revenue")),
        ]:
            conn.execute(text(f"SET application_name = 'h1/sqlalchemy/{label}'"))
            out[label] = call()
        results["sqlalchemy"] = out


def pandas_client() -> None:
    import pandas as pd
    from sqlalchemy import create_engine, text

    engine = create_engine(
        f"postgresql+psycopg://pitstop@127.0.0.1:{PORT}/pitstop",
        connect_args={"application_name": "h1/pandas/connect"},
    )
    with engine.connect() as conn:
        conn.execute(text("SET application_name = 'h1/pandas/read_sql-query'"))
        df = pd.read_sql("SELECT region, revenue, orders FROM daily_revenue ORDER BY region", conn)
        conn.execute(text("SET application_name = 'h1/pandas/read_sql-table'"))
        df2 = pd.read_sql("daily_revenue", conn)
        conn.execute(text("SET application_name = 'h1/pandas/read_sql_table'"))
        df3 = pd.read_sql_table("daily_revenue", conn)
    results["pandas"] = (df.to_dict("records"), df2.dtypes.to_dict(), len(df3))


RUNNERS = {
    "psycopg": psycopg_client,
    "asyncpg": lambda: asyncio.run(asyncpg_client()),
    "sqlalchemy": sqlalchemy_client,
    "pandas": pandas_client,
}

if __name__ == "__main__":
    failed = 0
    for name in WHICH:
        try:
            RUNNERS[name]()
            print(f"OK {name}")
        except Exception as exc:  # report and go on with the next client
            failed += 1
            print(f"FAIL {name}: {type(exc).__name__}: {exc}")
    for key, value in results.items():
        print(key, "=", value)
    sys.exit(1 if failed else 0)
