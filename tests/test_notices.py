"""A statement's notices over the wire: which lines warn is said by the result, not guessed from
its words. No Spark: catalog statements and SHOW JOBS of a real server, read by psycopg."""

from __future__ import annotations

from pathlib import Path

import psycopg

from conftest import settings
from server_helpers import serving


def notices_of(url: str, sql: str) -> list[tuple[str, str]]:
    got: list[tuple[str, str]] = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.add_notice_handler(
            lambda d: got.append((d.severity_nonlocalized or "", d.message_primary or ""))
        )
        conn.execute(sql)
    return got


def test_a_line_that_names_a_warning_is_a_notice_and_a_warning_is_a_warning(tmp_path: Path) -> None:
    """A mapping named ``warnings`` made its "created" line a WARNING (the server looked for the
    word); SHOW JOBS's line about a supervisor that cannot work is the one that warns (it was not
    sent at all: a result with rows sent no notice)."""
    with serving(settings(tmp_path / "home")) as served:
        url = served.url()
        created = notices_of(url, f"CREATE MAPPING warnings TYPE File OPTIONS ('path'='{tmp_path / 'w'}')")
        assert created and all(severity == "NOTICE" for severity, _ in created), created
        assert any("warnings" in text for _, text in created)
        served.manager.supervisor_problem = "the supervisor stopped: no space left on device"
        shown = notices_of(url, "SHOW JOBS")
        assert (
            "WARNING",
            "WARNING: the supervisor stopped: no space left on device; see the log in <home>/logs",
        ) in shown
        assert len(shown) == 1  # the rows say the rest
