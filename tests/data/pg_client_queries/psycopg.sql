-- Statements psycopg sent to PostgreSQL 15 (recorded with log_statement=all).

-- client: psycopg; action: connect
BEGIN

-- client: psycopg; action: query
-- params: ["1"]
SELECT region, revenue, orders FROM daily_revenue WHERE orders > $1 ORDER BY region

-- client: psycopg; action: query
COMMIT

-- client: psycopg; action: type-info
SAVEPOINT "_pg3_1"

-- client: psycopg; action: type-info
-- params: ["numeric"]
SELECT
    typname AS name, oid, typarray AS array_oid,
    oid::regtype::text AS regtype, typdelim AS delimiter
FROM pg_type t
WHERE t.oid = to_regtype($1)
ORDER BY t.oid

-- client: psycopg; action: type-info
RELEASE "_pg3_1"
