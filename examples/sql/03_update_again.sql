-- The pit stop, part 3: the job is updated again. Stop it with a second snapshot, and start the
-- same SQL from it (a later change works the same way): both stages go on from their state.

DROP JOB revenue WITH SNAPSHOT revenue_v2;

CREATE JOB revenue FROM SNAPSHOT revenue_v2 AS
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

SELECT count(*) AS daily_rows, max(window_end) AS last_day FROM daily_revenue;
SELECT count(*) AS hourly_rows, max(window_end) AS last_hour FROM hourly_revenue;

SHOW SNAPSHOTS;
