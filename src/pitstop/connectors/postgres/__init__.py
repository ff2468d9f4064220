"""The PostgreSQL connector: an exactly-once sink into a PostgreSQL table (:mod:`.sink`), and its
declaration (:mod:`.connector`)."""
