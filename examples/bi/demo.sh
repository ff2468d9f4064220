#!/usr/bin/env bash
# make bi-demo: Apache Superset (from PyPI, in its own virtualenv .bi/venv) on pitstop serve.
# 1. installs Superset and headless Chromium if missing; 2. runs the quickstart pit stop into a
# demo home; 3. starts pitstop serve on it and Superset beside it; 4. examples/bi/superset_demo.py
# adds the database, a dataset, a bar chart, runs SHOW JOBS in SQL Lab, takes the screenshot
# examples/work/superset_chart.png; 5. stops both by PID.
set -euo pipefail
cd "$(dirname "$0")/../.."
BI=.bi
PITSTOP_PORT=${PITSTOP_PORT:-55422}
SUPERSET_PORT=${SUPERSET_PORT:-8089}
if [ ! -x "$BI/venv/bin/superset" ]; then
    echo "installing Apache Superset into $BI/venv (about 800 MB, a few minutes)"
    python3 -m venv "$BI/venv"
    "$BI/venv/bin/pip" install --quiet --upgrade pip
    # Superset 6.1's own pins miss these (measured 2026-11): rich and cachetools are imported at
    # start, and Flask-Caching 2.4+ passes an argument its metastore cache does not take.
    "$BI/venv/bin/pip" install --quiet 'apache-superset==6.1.0' psycopg2-binary selenium rich cachetools \
        'flask-caching==2.3.1'
fi
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver
fi
export SUPERSET_CONFIG_PATH="$PWD/$BI/superset_config.py" FLASK_APP=superset
if [ ! -f "$SUPERSET_CONFIG_PATH" ]; then  # written once: its key encrypts Superset's metadata
    cat > "$SUPERSET_CONFIG_PATH" <<CONF
SECRET_KEY = "$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
SQLALCHEMY_DATABASE_URI = "sqlite:///$PWD/$BI/superset.db"
WTF_CSRF_ENABLED = False
TALISMAN_ENABLED = False
CONF
fi
if [ ! -f "$BI/superset.db" ]; then
    "$BI/venv/bin/superset" db upgrade >/dev/null 2>&1
    "$BI/venv/bin/superset" fab create-admin --username admin --password admin --firstname Ada \
        --lastname Admin --email admin@example.com >/dev/null 2>&1
    "$BI/venv/bin/superset" init >/dev/null 2>&1
fi

# The quickstart's pit stop into a home of the demo's own.
export PITSTOP_HOME=examples/work/bi-home
rm -rf examples/work/bi-home examples/work/orders
mkdir -p examples/work
.venv/bin/python examples/make_orders.py examples/work/orders --first 0 --last 2000 >/dev/null
.venv/bin/pitstop run examples/sql/01_start.sql >/dev/null
.venv/bin/python examples/make_orders.py examples/work/orders --first 2000 --last 4000 >/dev/null
.venv/bin/pitstop run examples/sql/02_update.sql >/dev/null

.venv/bin/pitstop serve --port "$PITSTOP_PORT" > examples/work/bi-serve.log 2>&1 &
PITSTOP_PID=$!
"$BI/venv/bin/superset" run -h 127.0.0.1 -p "$SUPERSET_PORT" --with-threads > examples/work/bi-superset.log 2>&1 &
SUPERSET_PID=$!
trap 'kill -TERM $SUPERSET_PID $PITSTOP_PID 2>/dev/null; wait $PITSTOP_PID 2>/dev/null || true' EXIT
for _ in $(seq 120); do
    if curl -sf "http://127.0.0.1:$SUPERSET_PORT/health" >/dev/null && grep -q "listening on" examples/work/bi-serve.log; then
        break
    fi
    sleep 1
done
"$BI/venv/bin/python" examples/bi/superset_demo.py --superset "http://127.0.0.1:$SUPERSET_PORT" \
    --pitstop "postgresql+psycopg2://analyst@127.0.0.1:$PITSTOP_PORT/pitstop" --table daily_revenue \
    --drop revenue:revenue_from_superset --screenshot examples/work/superset_chart.png
echo "screenshot: examples/work/superset_chart.png"
