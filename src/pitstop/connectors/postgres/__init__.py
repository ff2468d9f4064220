"""The PostgreSQL connector: an exactly-once sink into a PostgreSQL table (:mod:`.sink`, with its
mapping's options, :mod:`.options`; its tables, :mod:`.table`; the write of one batch, :mod:`.writes`;
its rollback to a snapshot's cut, :mod:`.rollback`), and its declaration (:mod:`.connector`)."""
