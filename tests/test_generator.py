"""The Generator source's clock (no Spark needed)."""

from __future__ import annotations

from pathlib import Path

from pitstop.connectors.generator.source import generator_available


def test_the_first_look_at_a_generator_counts_from_its_own_clock(tmp_path: Path) -> None:
    """The first call starts the run's clock; it must not read the time before that, which gave
    a negative position (and AWAIT JOB a target already behind the job)."""
    options = {"rate": "1000000000000", "limit": "300"}
    assert generator_available(tmp_path, "events", options, 0) == 300
    assert generator_available(tmp_path / "other", "events", options, 120) == 300
    slow = {"rate": "0.001"}
    assert generator_available(tmp_path / "slow", "events", slow, 7) == 7
