"""The Console connector: a sink that prints each batch (:mod:`.sink`), and its declaration
(:mod:`.connector`)."""
