"""The Prometheus endpoint of ``pitstop serve --metrics-port N``: ``GET /metrics`` answers the
manager's last metrics sample (:mod:`pitstop.engine.metrics`, taken every ``PITSTOP_METRICS_S``
seconds) in Prometheus's text format 0.0.4, and reads nothing of Spark itself: a scrape costs a
rendering of what is already sampled, and two cached catalog reads.

Names follow Flink's metrics where Flink has one (``numRecordsInPerSecond``,
``currentInputWatermark``, ``numLateRecordsDropped``, ``numRestarts``, FLIP-33's
``pendingRecords`` and ``numRecordsInErrors``), behind a ``pitstop_job_`` prefix and its scope
(``stage_``, ``source_``) as Flink's Prometheus reporter writes them; like that reporter's, every
metric is a gauge. The standard library's HTTP server is enough for one text page; no new
dependency."""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING

from pitstop.catalog.rows import RUNNING, MetricSample
from pitstop.errors import PitstopError

if TYPE_CHECKING:
    from pitstop.manager import Manager

log = logging.getLogger(__name__)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PATH = "/metrics"
REQUEST_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Family:
    """One metric: its name, help text, the labels of its scope and its value in a sample row
    (None: no series for that row)."""

    name: str
    help: str
    scope: str  # "branch", "stage" or "source"
    value: Callable[[MetricSample], float | int | None]


def _millis(at: datetime | None) -> int | None:
    return None if at is None else int(at.replace(tzinfo=UTC).timestamp() * 1000)


FAMILIES: tuple[Family, ...] = (
    Family(
        "pitstop_job_numRecordsInPerSecond",
        "rows read per second in the branch's last micro-batch (Spark's inputRowsPerSecond)",
        "branch",
        lambda s: s.input_rows_per_s,
    ),
    Family(
        "pitstop_job_numRecordsProcessedPerSecond",
        "rows processed per second in the branch's last micro-batch (Spark's processedRowsPerSecond)",
        "branch",
        lambda s: s.processed_rows_per_s,
    ),
    Family(
        "pitstop_job_lastBatchNumRecordsIn",
        "rows the branch's last micro-batch read (Spark's numInputRows)",
        "branch",
        lambda s: s.input_rows,
    ),
    Family(
        "pitstop_job_lastBatchDuration",
        "how long the branch's last micro-batch took, in milliseconds (Spark's triggerExecution)",
        "branch",
        lambda s: s.batch_ms,
    ),
    Family("pitstop_job_lastBatchId", "the branch's last micro-batch", "branch", lambda s: s.batch_id),
    Family(
        "pitstop_job_currentInputWatermark",
        "the branch's event-time watermark, in milliseconds since the epoch",
        "branch",
        lambda s: _millis(s.watermark),
    ),
    Family(
        "pitstop_job_numRestarts",
        "restarts of the branch from its checkpoint since its queries started in this process",
        "branch",
        lambda s: s.restarts,
    ),
    Family(
        "pitstop_job_stage_stateRows",
        "rows in the stage's state (absent: Spark does not count them with pitstop's RocksDB settings)",
        "stage",
        lambda s: s.state_rows,
    ),
    Family(
        "pitstop_job_stage_stateMemoryUsedBytes",
        "memory the stage's state store uses, in bytes (Spark's memoryUsedBytes)",
        "stage",
        lambda s: s.state_bytes,
    ),
    Family(
        "pitstop_job_stage_numLateRecordsDropped",
        "rows the stage dropped behind the watermark, as SHOW JOBS counts them",
        "stage",
        lambda s: s.late_rows,
    ),
)
SCOPES = {
    "branch": ("job", "branch", "sink"),
    "stage": ("job", "branch", "sink", "stage"),
    "source": ("job", "branch", "sink", "source", "partition"),
}


def exposition(manager: Manager) -> str:
    """The metrics page: the last sample of the jobs still running here (a job dropped or
    suspended since is left out), each job's state and its rejected records."""
    running = {key: run.run.run_id for key, run in list(manager.runs.items())}
    rows = [s for s in manager.last_sample if running.get(s.job.lower()) == s.run_id]
    lines: list[str] = []
    branches = list({(s.job, s.branch): s for s in rows}.values())  # branch figures repeat per stage
    stages = [s for s in rows if s.stage is not None]
    for family in FAMILIES:
        of = branches if family.scope == "branch" else stages
        series = [(_labels(family.scope, s), family.value(s)) for s in of]
        _family(lines, family.name, family.help, [(labels, v) for labels, v in series if v is not None])
    pending = [
        (_labels("source", s, source, partition), n)
        for s in branches
        for source, partitions in (s.lag or {}).items()
        for partition, n in partitions.items()
    ]
    _family(
        lines,
        "pitstop_job_source_pendingRecords",
        "records behind the end of the source partition (Kafka), at the branch's committed position",
        pending,
    )
    jobs = manager.catalog.jobs()
    rejects = manager.catalog.reject_counts()
    _family(
        lines,
        "pitstop_job_running",
        "1 while the job runs in this process, else 0 (SHOW JOBS says why)",
        [
            ({"job": j.name, "status": j.status}, int(j.status == RUNNING and j.name.lower() in running))
            for j in jobs
        ],
    )
    _family(
        lines,
        "pitstop_job_numRecordsInErrors",
        "malformed records the job's sources kept out (pitstop.rejects, as SHOW JOBS counts them)",
        [({"job": j.name}, rejects.get(j.name.lower(), 0)) for j in jobs],
    )
    return "".join(lines)


def _labels(scope: str, s: MetricSample, source: str = "", partition: str = "") -> dict[str, str]:
    values = {
        "job": s.job,
        "branch": str(s.branch),
        "sink": s.sink,
        "stage": s.stage or "",
        "source": source,
        "partition": partition,
    }
    return {name: values[name] for name in SCOPES[scope]}


def family_lines(name: str, text: str, series: Iterable[tuple[dict[str, str], float | int]]) -> str:
    """One gauge in the text format: its help, its type and a line per series."""
    lines = [f"# HELP {name} {_escape_help(text)}\n", f"# TYPE {name} gauge\n"]
    for labels, value in series:
        shown = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
        lines.append(f"{name}{{{shown}}} {_number(value)}\n")
    return "".join(lines)


def _family(
    lines: list[str], name: str, text: str, series: Iterable[tuple[dict[str, str], float | int]]
) -> None:
    lines.append(family_lines(name, text, series))


def _number(value: float | int) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class MetricsEndpoint:
    """An HTTP listener answering ``GET /metrics`` from a thread of its own; anything else is 404."""

    def __init__(self, manager: Manager, host: str, port: int) -> None:
        self.manager = manager
        self.host = host
        self.port = port
        self._http: HTTPServer | None = None

    def listen(self) -> str:
        """Bind and serve on a background thread (port 0 picks a free one); returns the URL."""
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            timeout = REQUEST_TIMEOUT_S  # a client that stops sending holds up the next scrape no longer

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.split("?", 1)[0] != PATH:
                    self.send_error(404, f"pitstop serves its metrics at {PATH}")
                    return
                try:
                    body = exposition(endpoint.manager).encode()
                except Exception:  # noqa: BLE001 - a scrape fails, the server goes on
                    log.exception("the metrics page could not be written")
                    self.send_error(500, "the metrics could not be read; see <home>/logs/pitstop.log")
                    return
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
                log.debug("metrics endpoint: %s", format % args)

        class Listener(HTTPServer):
            # One thread answers every scrape, one after the other: the page is small, and the
            # catalog gives each thread a cursor of its own for as long as it is open (a thread
            # per request would leave one behind per scrape).
            address_family = socket.AF_INET6 if ":" in endpoint.host else socket.AF_INET

            def server_bind(self) -> None:
                # http.server's own asks the resolver for the host's full name (socket.getfqdn),
                # which can wait seconds for a DNS server; the name is used for nothing here.
                socketserver.TCPServer.server_bind(self)
                self.server_name, self.server_port = endpoint.host, self.server_address[1]

        try:
            http = Listener((self.host, self.port), Handler)
        except OSError as exc:
            raise PitstopError(
                f"cannot serve metrics on {self.host}:{self.port}: {exc.strerror or exc}; choose another "
                "port with --metrics-port"
            ) from exc
        self._http = http
        self.port = http.server_address[1]
        threading.Thread(target=http.serve_forever, name="pitstop-metrics", daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{PATH}"

    def shutdown(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
