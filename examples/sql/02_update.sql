-- The pit stop, part 2: more orders have arrived. The updated job adds a filter and an hourly
-- window next to the daily one, and starts from the snapshot: the day in progress keeps its state.

CREATE MAPPING hourly_revenue TYPE DuckDB;

CREATE JOB revenue FROM SNAPSHOT revenue_v1 AS
BEGIN
    INSERT INTO daily_revenue
    SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '24' HOUR))
    WHERE amount >= 1
    GROUP BY window_start, window_end, region;

    INSERT INTO hourly_revenue
    SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR))
    WHERE amount >= 1
    GROUP BY window_start, window_end, region;
END;

AWAIT JOB revenue;

SELECT window_start, region, revenue, orders FROM daily_revenue ORDER BY window_start, region;

SELECT count(*) AS hourly_rows, min(window_start) AS first_hour, max(window_end) AS last_hour
FROM hourly_revenue;

SHOW JOBS;
