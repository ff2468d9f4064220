"""The DuckDB connector: tables in the home's DuckDB file, appended to (:mod:`.sink`) or upserted
by key (:mod:`.upsert`), and its declaration (:mod:`.connector`)."""
