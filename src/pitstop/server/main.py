"""The ``pitstop serve`` process: open the home, listen, resume the jobs, serve until a signal."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from pitstop import logs
from pitstop.catalog.rows import RUNNING, STOPPED
from pitstop.settings import Settings

log = logging.getLogger(__name__)


def serve(
    settings: Settings,
    host: str,
    port: int,
    tls_cert: str | None,
    tls_key: str | None,
    announce: Any = print,
    require_tls: bool = False,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> int:
    """Run the server until SIGTERM or SIGINT; the exit status (0 after a clean stop). With
    ``metrics_port``, a Prometheus endpoint too (:mod:`pitstop.server.metrics`)."""
    from pitstop.engine.session import spark_session
    from pitstop.manager import Manager
    from pitstop.server.app import Server, tls_context
    from pitstop.server.metrics import MetricsEndpoint

    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        log.info("signal %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    context = tls_context(tls_cert, tls_key)
    manager = Manager(settings)
    logfile = logs.to_home(settings.home)
    endpoint = None if metrics_port is None else MetricsEndpoint(manager, metrics_host, metrics_port)
    try:
        server = Server(manager, host, port, context, require_tls=require_tls)
        if not settings.local:
            # A cluster that cannot run the jobs (no executor, pitstop missing on the workers, a
            # home they cannot see) stops the server here, before any client or job relies on it.
            announce(f"pitstop serve: connecting to {settings.master}")
            spark_session(settings)
        if endpoint is not None:  # before the PostgreSQL port: a port in use stops the server early
            endpoint.listen()
        address = server.listen()
    except BaseException:
        if endpoint is not None:
            endpoint.shutdown()
        manager.close()
        raise
    waiting = [j.name for j in manager.catalog.jobs() if j.status in (RUNNING, STOPPED)]
    if waiting:  # resume them now: the server is what runs the jobs
        for name in waiting:
            manager.catalog.set_job_status(name, STOPPED, "resuming: pitstop serve is starting Spark")
        threading.Thread(target=_start_spark, args=(manager,), name="pitstop-resume", daemon=True).start()
    announce(
        f"pitstop serve: listening on {address.url()} (home {settings.home}; "
        f"{len(waiting)} job(s) to resume; log {logfile}){_tls_said(context, require_tls)}"
        + ("" if endpoint is None else f"; metrics on {endpoint.url}")
    )
    log.info("listening on %s:%s, home %s", address.host, address.port, settings.home)
    while not stop.wait(0.5):
        pass
    server.shutdown()
    if endpoint is not None:
        endpoint.shutdown()
    log.info("stopping every job at a batch boundary")
    manager.close()
    log.info("stopped")
    return 0


def _start_spark(manager: Any) -> None:
    try:
        manager.spark()
    except Exception:
        log.exception("Spark could not start; jobs stay as they are until a statement needs Spark")


def _tls_said(context: Any, required: bool) -> str:
    if context is None:
        return ""
    return " with TLS required" if required else " with TLS"
