#!/usr/bin/env bash
# The quickstart, end to end: orders arrive, a daily revenue job runs, stops with a snapshot,
# more orders arrive, and the updated job (a filter and an hourly window more) starts from it;
# then more orders, and a second pit stop; then what a further change would write, replayed and diffed.
set -euo pipefail
cd "$(dirname "$0")/.."
PITSTOP="${PITSTOP:-.venv/bin/pitstop}"
PYTHON="${PYTHON:-.venv/bin/python}"
export PITSTOP_HOME="examples/work/home"

rm -rf examples/work
echo "== orders 0..1999 arrive"
"$PYTHON" examples/make_orders.py examples/work/orders --first 0 --last 2000 --files 4
echo "== pitstop run examples/sql/01_start.sql"
"$PITSTOP" run examples/sql/01_start.sql
echo "== orders 2000..3999 arrive"
"$PYTHON" examples/make_orders.py examples/work/orders --first 2000 --last 4000 --files 4
echo "== pitstop run examples/sql/02_update.sql"
"$PITSTOP" run examples/sql/02_update.sql
echo "== orders 4000..5999 arrive"
"$PYTHON" examples/make_orders.py examples/work/orders --first 4000 --last 6000 --files 4
echo "== pitstop run examples/sql/03_update_again.sql"
"$PITSTOP" run examples/sql/03_update_again.sql
echo "== pitstop test examples/changes/daily_over_50.sql: what a higher filter would change, before it goes live"
"$PITSTOP" test examples/changes/daily_over_50.sql --expect changes
echo "== done: the job is stopped now and resumes the next time pitstop runs on $PITSTOP_HOME"
