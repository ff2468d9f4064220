"""The Generator connector: rows made up from a seed, as a source (:mod:`.source`), and its
declaration (:mod:`.connector`)."""
