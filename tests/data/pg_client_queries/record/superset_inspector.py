"""What Superset (SQLAlchemy 1.4 + psycopg2) asks when a user browses a database: schemas,
tables, views, then a table's metadata and its preview query (Superset's select_star)."""

import sys

from sqlalchemy import create_engine, inspect, text

PORT = int(sys.argv[1])
engine = create_engine(
    f"postgresql+psycopg2://pitstop@127.0.0.1:{PORT}/pitstop",
    connect_args={"application_name": "h1/superset/connect"},
)
out = {}
with engine.connect() as conn:
    insp = inspect(conn)
    steps = [
        ("get_schema_names", lambda: insp.get_schema_names()),
        ("get_table_names", lambda: insp.get_table_names(schema="public")),
        ("get_view_names", lambda: insp.get_view_names(schema="public")),
        ("get_foreign_table_names", lambda: insp.get_foreign_table_names(schema="public")),
        (
            "get_materialized_view_names",
            lambda: (
                insp.get_materialized_view_names(schema="public")
                if hasattr(insp, "get_materialized_view_names")
                else None
            ),
        ),
        ("has_table", lambda: engine.dialect.has_table(conn, "daily_revenue", schema="public")),
        ("get_columns", lambda: insp.get_columns("daily_revenue", schema="public")),
        ("get_pk_constraint", lambda: insp.get_pk_constraint("daily_revenue", schema="public")),
        ("get_foreign_keys", lambda: insp.get_foreign_keys("daily_revenue", schema="public")),
        ("get_indexes", lambda: insp.get_indexes("daily_revenue", schema="public")),
        ("get_unique_constraints", lambda: insp.get_unique_constraints("daily_revenue", schema="public")),
        ("get_table_comment", lambda: insp.get_table_comment("daily_revenue", schema="public")),
        ("get_check_constraints", lambda: insp.get_check_constraints("daily_revenue", schema="public")),
        ("get_table_names_pitstop", lambda: insp.get_table_names(schema="pitstop")),
        ("get_columns_pitstop_jobs", lambda: insp.get_columns("jobs", schema="pitstop")),
        (
            "select_star",
            lambda: conn.execute(
                text(
                    "SELECT window_start, window_end, region, revenue, orders \n"
                    "FROM public.daily_revenue\n LIMIT 100"
                )
            ).fetchall(),
        ),
    ]
    for label, call in steps:
        conn.execute(text(f"SET application_name = 'h1/superset/{label}'"))
        out[label] = call()
for k, v in out.items():
    print(k, "=", v)
