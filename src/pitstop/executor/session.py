"""SET: the session's settings."""

from __future__ import annotations

from dataclasses import replace

from pitstop import settings
from pitstop.errors import PitstopError, PlanError, UnknownOptionError
from pitstop.executor.base import ExecutorBase
from pitstop.executor.results import Result
from pitstop.spelling import close_name
from pitstop.sql import nodes
from pitstop.sql.parser import ParsedStatement

SESSION_SETTINGS = {
    "trigger_ms": "how often jobs started from now on look for new input, in milliseconds",
    "await_timeout_s": "how long AWAIT JOB waits when it names no TIMEOUT, in seconds",
}
DEFAULT_AWAIT_S = 600.0


class SessionStatements(ExecutorBase):
    """SET 'key' = 'value'."""

    def _set(self, node: nodes.SetOption, stmt: ParsedStatement) -> Result:
        key, value = node.this.name, node.expression.name
        if key not in SESSION_SETTINGS:
            if key.startswith("execution.savepoint"):
                raise PlanError(
                    f"'{key}' is Flink's; pitstop starts jobs from snapshots with "
                    "CREATE JOB ... FROM SNAPSHOT name"
                )
            raise UnknownOptionError(
                f"unknown setting '{key}'{close_name(key, list(SESSION_SETTINGS))}; known settings: "
                + ", ".join(f"{k} ({v})" for k, v in SESSION_SETTINGS.items())
            )
        if key == "trigger_ms":  # as PITSTOP_TRIGGER_MS takes it (pitstop.settings)
            try:
                trigger_ms = settings.parse(key, value, f"setting '{key}'")
            except PitstopError as err:
                raise PlanError(err.message) from None
            if self.manager is not None:
                self.manager.settings = replace(self.manager.settings, trigger_ms=trigger_ms)
        else:
            try:
                number = float(value)
            except ValueError:
                number = -1
            if not 0 < number < float("inf"):
                raise PlanError(f"setting '{key}' takes a positive number, got '{value}'")
        self.session[key] = value
        return Result(f"{key} = {value}")
