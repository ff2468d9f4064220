"""The Kafka connector's reserved names: the metadata columns a mapping may declare, and the
files a run keeps per Kafka source. Read by its connector, source and sink."""

from __future__ import annotations

KEY, PARTITION, OFFSET, TIMESTAMP = "__key", "__partition", "__offset", "__timestamp"
METADATA_TYPES = {
    KEY: ("STRING", "BIGINT"),
    PARTITION: ("INT", "BIGINT"),
    OFFSET: ("BIGINT",),
    TIMESTAMP: ("TIMESTAMP",),
}
"""The reserved column names and the (Spark) types each may be declared with."""
INITIAL = "initial.json"  # in a run's source folder: the offsets the run started from
BROKER = "broker.json"  # in a run's source folder: what the driver last learnt of the broker
