-- A change to the quickstart job, for `pitstop test` (not `pitstop run`: the job it changes runs).
-- Before an update goes live: what would it write? `pitstop test` replays what the job read since
-- snapshot revenue_v2 through this SQL and through the job's own, and diffs each sink
-- (EXPLAIN ANALYZE CREATE JOB); nothing is started, no sink is written. Here: orders under 50
-- no longer count in the daily revenue (the hourly one is as before).

CREATE JOB revenue FROM SNAPSHOT revenue_v2 AS
BEGIN
    INSERT INTO daily_revenue
    SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '24' HOUR))
    WHERE amount >= 50
    GROUP BY window_start, window_end, region;

    INSERT INTO hourly_revenue
    SELECT window_start, window_end, region, SUM(amount) AS revenue, COUNT(*) AS orders
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR))
    WHERE amount >= 1
    GROUP BY window_start, window_end, region;
END;
