"""The Spark session: built once per process, lazily, with defaults that suit a laptop."""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

from pitstop.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
_lock = threading.Lock()
_session: SparkSession | None = None


def spark_session(settings: Settings) -> SparkSession:
    """The process's Spark session, created on first use."""
    global _session
    with _lock:
        if _session is not None:
            return _session
        # Python workers must run the interpreter that has pitstop installed.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        from pitstop.connectors.files import FileSource
        from pitstop.connectors.generator import GeneratorSource

        log.info("starting Spark (%s)", settings.master)
        builder = (
            SparkSession.builder.appName("pitstop")
            .master(settings.master)
            .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
            .config("spark.sql.session.timeZone", "UTC")
            .config(
                "spark.sql.streaming.stateStore.providerClass",
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
            )
            # RocksDB otherwise reads every key before writing it, only to count the state's rows
            # for a metric; without that read, a restore seeds 1M keys ~1/3 faster (bench/RESULTS.md).
            .config("spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows", "false")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.streaming.metricsEnabled", "false")
            .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
            .config("spark.sql.warehouse.dir", str(settings.home / "spark-warehouse"))
            .config("spark.driver.memory", os.environ.get("PITSTOP_DRIVER_MEMORY", "2g"))
        )
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        session.dataSource.register(FileSource)
        session.dataSource.register(GeneratorSource)
        _session = session
        return session


def running_session() -> SparkSession | None:
    return _session


def stop_session() -> None:
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None
