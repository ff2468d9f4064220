"""What a job plan is: its branches and stages (:mod:`~pitstop.plan.model`), the SQL and Spark types
of their columns (:mod:`~pitstop.plan.types`) and the names in scope at each layer of a SELECT
(:mod:`~pitstop.plan.scope`). The layer every other one builds on: the planner makes plans of SQL,
the stage kinds and connectors run them; this package imports none of them."""
