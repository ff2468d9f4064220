"""SQL text of pitstop's own statements, for the TRANSFORMS of
:class:`pitstop.sql.dialect.PitstopDialect.Generator`."""

from __future__ import annotations

from sqlglot import exp, generator

from pitstop.sql import nodes


def clause(gen: generator.Generator, e: exp.Expr, key: str, prefix: str) -> str:
    value = gen.sql(e, key)
    return f"{prefix}{value}" if value else ""


def options_sql(gen: generator.Generator, e: exp.Expr) -> str:
    return f"OPTIONS ({', '.join(gen.sql(option) for option in e.args['options'])})"


def alter_job_sql(gen: generator.Generator, e: nodes.AlterJob) -> str:
    action = e.args["action"]
    if not e.args.get("options"):
        return f"ALTER JOB {gen.sql(e, 'this')} {action}"
    resume = " RESUME" if action == "RESUME" else ""
    return f"ALTER JOB {gen.sql(e, 'this')} {options_sql(gen, e)}{resume}"


def drop_sql(gen: generator.Generator, e: exp.Expr, kind: str) -> str:
    exists = "IF EXISTS " if e.args.get("exists") else ""
    return f"DROP {kind} {exists}{gen.sql(e, 'this')}"


def create_mapping_sql(gen: generator.Generator, e: nodes.CreateMapping) -> str:
    replace = "OR REPLACE " if e.args.get("replace") else ""
    exists = "IF NOT EXISTS " if e.args.get("exists") else ""
    parts = [gen.sql(column) for column in e.args.get("columns") or []]
    if e.args.get("watermark"):
        parts.append(gen.sql(e, "watermark"))
    schema = f" ({', '.join(parts)})" if parts else ""
    options = f" {options_sql(gen, e)}" if e.args.get("options") else ""
    return f"CREATE {replace}MAPPING {exists}{gen.sql(e, 'this')}{schema} TYPE {gen.sql(e, 'kind')}{options}"


def create_job_sql(gen: generator.Generator, e: nodes.CreateJob) -> str:
    exists = "IF NOT EXISTS " if e.args.get("exists") else ""
    options = f" {options_sql(gen, e)}" if e.args.get("options") else ""
    snapshot = clause(gen, e, "snapshot", " FROM SNAPSHOT ") + clause(gen, e, "until", " UNTIL SNAPSHOT ")
    inserts = [gen.sql(insert) for insert in e.args["body"]]
    body = inserts[0] if len(inserts) == 1 else f"BEGIN {'; '.join(inserts)}; END"
    return f"CREATE JOB {exists}{gen.sql(e, 'this')}{options}{snapshot} AS {body}"
