"""Ask the reference PostgreSQL every query of the corpus (with its recorded parameters) and save
its answers, per client in corpus order: column names and rows (rows left out past 40).

    python record_answers.py postgresql://pitstop@127.0.0.1:55401/pitstop CORPUS_DIR OUT.json
"""

from __future__ import annotations

import datetime
import decimal
import json
import re
import sys
from pathlib import Path
from typing import Any

import psycopg

QUERY_WORDS = ("SELECT", "WITH", "VALUES", "TABLE", "(")


def entries(folder: Path) -> list[tuple[str, str, list[Any] | None, str]]:
    out = []
    for path in sorted(folder.glob("*.sql")):
        for block in re.split(r"^-- client: ", path.read_text(), flags=re.M)[1:]:
            header, _, body = block.partition("\n")
            client, action = header.split("; action: ", 1)
            params = None
            if body.startswith("-- params: "):
                line, _, body = body.partition("\n")
                params = json.loads(line[len("-- params: ") :])
            out.append((client, action, params, body.strip()))
    return out


def plain(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.date | datetime.time | datetime.timedelta):
        return str(value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def main(url: str, folder: Path, out: Path) -> None:
    answers: dict[str, list[dict[str, Any]]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for client, action, params, sql in entries(folder):
            if not sql.lstrip().upper().startswith(QUERY_WORDS):
                continue
            with psycopg.RawCursor(conn) as cur:
                cur.execute(sql, params or None)
                rows = [[plain(v) for v in row] for row in cur.fetchall()]
                columns = [d.name for d in cur.description or []]
            answer = {"action": action, "sql": sql, "columns": columns, "row_count": len(rows)}
            answer["rows"] = rows if len(rows) <= 40 else None
            answers.setdefault(client, []).append(answer)
    out.write_text(json.dumps(answers, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
