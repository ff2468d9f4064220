#!/bin/bash
# Run every client against a server on 127.0.0.1:$1 and write what each printed to $2/.
# Needs: psql ($PGBIN), a venv with psycopg[binary] asyncpg 'sqlalchemy>=2' pandas pgcli ($PY),
# a venv with 'sqlalchemy<2' psycopg2-binary ($PY14), the JDBC driver and a JDK, tmux.
set -u
PORT=$1; OUT=$(realpath -m "$2"); mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PY=${PY:-/tmp/h1-venv/bin/python}
PY14=${PY14:-/tmp/h1-venv14/bin/python}
JAR=${JAR:-/usr/share/java/postgresql.jar}
cd "$HERE"
for cmd in '\dt' '\d daily_revenue' '\l' '\dn' '\d' '\d+ daily_revenue' '\d pitstop.jobs' '\du' '\df' '\dv' \
           '\di' '\dT' '\dx' '\dp' '\db' '\dC' '\do' '\dy' '\dc' '\l+' '\dt+' '\dn+'; do
  echo "== psql $cmd" >> "$OUT/psql.out"
  PGAPPNAME="h1/psql/$cmd" timeout 20 "$PGBIN/psql" -X -h 127.0.0.1 -p "$PORT" -U pitstop pitstop -c "$cmd" >> "$OUT/psql.out" 2>&1
done
timeout 60 "$PY" py_clients.py "$PORT" psycopg > "$OUT/py.out" 2>&1
timeout 60 "$PY" py_clients.py "$PORT" asyncpg >> "$OUT/py.out" 2>&1
timeout 60 "$PY" py_clients.py "$PORT" sqlalchemy pandas >> "$OUT/py.out" 2>&1
timeout 60 "$PY14" superset_inspector.py "$PORT" > "$OUT/superset.out" 2>&1
CLASSES=$(mktemp -d) && javac -d "$CLASSES" -cp "$JAR" JdbcMeta.java && \
  timeout 60 java -cp "$JAR:$CLASSES" JdbcMeta "$PORT" > "$OUT/jdbc.out" 2>&1
PGCLI=$(dirname "$PY")/pgcli ./pgcli_run.sh "$PORT" "$OUT/pgcli.out"
