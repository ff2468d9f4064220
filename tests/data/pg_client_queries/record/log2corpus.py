"""Split a PostgreSQL log (log_statement=all, log_line_prefix '%m [%p] app=%a ') into one corpus
file per client: every statement the client sent, labelled by client and action, with the
parameters of extended-protocol executions."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HEAD = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \w+ \[(\d+)\] app=(.*?) "
    r"(LOG|DETAIL|ERROR|STATEMENT|WARNING|HINT|FATAL):  (.*)$"
)
PARAM = re.compile(r"\$(\d+) = (NULL|'(?:[^']|'')*')")
MARK = re.compile(r"^SET application_name = 'h1/[^']*'$")


def records(text: str):
    cur = None
    for line in text.split("\n"):
        m = HEAD.match(line)
        if m:
            if cur:
                yield cur
            cur = [m.group(1), m.group(2), m.group(3), m.group(4)]
        elif cur is not None:
            cur[3] += "\n" + (line[1:] if line.startswith("\t") else line)
    if cur:
        yield cur


def main(log: Path, out: Path) -> None:
    entries: list[dict] = []
    label_of_pid: dict[str, str] = {}
    for pid, app, kind, msg in records(log.read_text()):
        if app.startswith("h1/"):
            label_of_pid.setdefault(pid, app)
        if kind == "LOG":
            m = re.match(r"(?:statement|execute [^:]*): (.*)$", msg, re.S)
            if not m:
                continue
            sql = m.group(1)
            if MARK.match(sql.strip()):
                continue
            entries.append({"pid": pid, "app": app, "sql": sql, "params": None})
        elif kind == "DETAIL" and msg.startswith("parameters:") and entries and entries[-1]["pid"] == pid:
            params = {}
            for num, value in PARAM.findall(msg):
                params[int(num)] = None if value == "NULL" else value[1:-1].replace("''", "'")
            entries[-1]["params"] = [params[i] for i in sorted(params)]
    by_client: dict[str, list[dict]] = {}
    for e in entries:
        app = e["app"] if e["app"].startswith("h1/") else label_of_pid.get(e["pid"], "h1/unknown/x")
        client, action = app.split("/", 2)[1:]
        if not e["app"].startswith("h1/"):
            action = "connect"
        e["action"] = action
        seen = by_client.setdefault(client, [])
        if not any(s["sql"] == e["sql"] and s["params"] == e["params"] for s in seen):
            seen.append(e)
    out.mkdir(parents=True, exist_ok=True)
    for client, items in by_client.items():
        lines = [f"-- Statements {client} sent to PostgreSQL 15 (recorded with log_statement=all).", ""]
        for e in items:
            lines.append(f"-- client: {client}; action: {e['action']}")
            if e["params"] is not None:
                lines.append(f"-- params: {json.dumps(e['params'])}")
            lines.append(e["sql"].rstrip())
            lines.append("")
        (out / f"{client}.sql").write_text("\n".join(lines))
        print(client, len(items))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
