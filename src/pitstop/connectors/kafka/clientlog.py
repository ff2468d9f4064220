"""librdkafka's own log lines (a connection refused, a broker that went away) go to pitstop's log
file, never over the terminal or a script's output: what matters of them pitstop says itself,
once, in its words (SHOW JOBS' "waits for the broker", a job's failure). Every Kafka client pitstop
builds in its own process hands them to :data:`LOGGER`."""

from __future__ import annotations

import logging

LOGGER = logging.getLogger("pitstop.kafka.client")


class _FileOnly(logging.Filter):
    """Marks each record for the log file only (:data:`pitstop.logs.FILE_ONLY`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.file_only = True
        return True


LOGGER.addFilter(_FileOnly())
