"""The README documents every setting a user can set (settings are declared once, as data)."""

from __future__ import annotations

from pathlib import Path

from pitstop.executor import ACTED_ON_OPTIONS, SESSION_SETTINGS
from pitstop.settings import SETTINGS

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_readme_names_every_environment_setting() -> None:
    missing = [s.env for s in SETTINGS if s.env not in README]
    assert missing == []


def test_readme_names_every_session_setting() -> None:
    missing = [key for key in SESSION_SETTINGS if f"'{key}'" not in README]
    assert missing == []


def test_readme_names_every_job_option_pitstop_acts_on() -> None:
    missing = [key for key in ACTED_ON_OPTIONS if f"'{key}'" not in README]
    assert missing == []
