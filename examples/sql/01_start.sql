-- The pit stop, part 1: a daily revenue job runs over the first orders, then stops with a snapshot.
-- Run from the repository root (paths are relative to where pitstop runs): see examples/quickstart.sh.

CREATE MAPPING orders (
    order_id BIGINT,
    region   VARCHAR,
    amount   DECIMAL(12,2),
    ts       TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE
) TYPE File OPTIONS ('path'='examples/work/orders', 'format'='json');

CREATE MAPPING daily_revenue TYPE DuckDB;     -- a table in the home's DuckDB database

CREATE JOB revenue AS
INSERT INTO daily_revenue
SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '24' HOUR))
GROUP BY window_start, window_end, region;

-- Wait until every order on disk is processed and the days it closes are written.
AWAIT JOB revenue;

SELECT window_start, region, revenue, orders FROM daily_revenue ORDER BY window_start, region;

-- Stop at a batch boundary and keep the state of the day still in progress.
DROP JOB revenue WITH SNAPSHOT revenue_v1;

SHOW SNAPSHOTS;
