"""The Kafka connector: a source of a topic's partitions (:mod:`.source`), an exactly-once
transactional sink (:mod:`.sink`), and its declaration (:mod:`.connector`)."""
