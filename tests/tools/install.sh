#!/usr/bin/env bash
# What the server tests need beyond Python packages: psql, the PostgreSQL JDBC driver and a Java
# compiler (for the JDBC client program); the psqlODBC driver and unixODBC's isql; and a PostgreSQL server, which the Postgres sink tests
# start in a temporary folder (tests/pg_helpers.py). Installed from Debian's packages when missing; nothing
# is done when they are already there. Run by `make test` (and `make bi-demo`).
set -euo pipefail
need=()
command -v psql >/dev/null 2>&1 || need+=(postgresql-client)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
[ -f /usr/share/java/postgresql.jar ] || need+=(libpostgresql-jdbc-java)
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v isql >/dev/null 2>&1 || need+=(unixodbc)
compgen -G '/usr/lib/*/odbc/psqlodbcw.so' >/dev/null || need+=(odbc-postgresql)
if [ ${#need[@]} -eq 0 ]; then
    exit 0
fi
echo "installing test tools: ${need[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
    else
        echo "ERROR: the server tests need ${need[*]} (Debian packages); install them as root" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
