"""The home's trash is emptied by age: opening the home removes what was moved there more than
``PITSTOP_TRASH_DAYS`` days ago, never anything younger (real folders, real mtimes, no Spark)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import settings
from pitstop.engine.tidy import TRASH
from pitstop.errors import PitstopError
from pitstop.manager import Manager
from pitstop.settings import Settings

DAY = 86400.0


def entry(home: Path, name: str, age_days: float, inner_age_days: float | None = None) -> Path:
    """A trash entry as tidy makes one: ``trash/<time>-<id>/<kind>/<folder>`` with a file, whose
    folders were last changed ``age_days`` ago (the kind folder ``inner_age_days`` ago)."""
    stamp = home / TRASH / name
    moved = stamp / "runs" / "j-0a1b2c3d"
    (moved / "branches").mkdir(parents=True)
    (moved / "branches" / "data").write_text("x" * 100)
    old = time.time() - 30 * DAY  # what was moved in is older still: its own times do not count
    os.utime(moved / "branches" / "data", (old, old))
    os.utime(moved / "branches", (old, old))
    os.utime(moved, (old, old))
    inner = time.time() - (age_days if inner_age_days is None else inner_age_days) * DAY
    os.utime(stamp / "runs", (inner, inner))
    outer = time.time() - age_days * DAY
    os.utime(stamp, (outer, outer))
    return stamp


def open_home(home: Path, days: float | None) -> None:
    Manager(dataclasses.replace(settings(home), trash_days=days)).close()


def test_opening_the_home_removes_trash_entries_older_than_the_setting(tmp_path: Path) -> None:
    home = tmp_path / "home"
    open_home(home, 7)
    old = entry(home, "20240101T000000-aaaaaa", age_days=8)
    older = entry(home, "20231201T000000-bbbbbb", age_days=40)
    young = entry(home, "20240108T000000-cccccc", age_days=6.9)
    # Its stamp folder is old, but something was moved into it yesterday: kept.
    touched = entry(home, "20240102T000000-dddddd", age_days=9, inner_age_days=1)
    stray = home / TRASH / "notes.txt"  # a file someone put there, last changed 10 days ago
    stray.write_text("mine")
    os.utime(stray, (time.time() - 10 * DAY,) * 2)

    open_home(home, 7)

    assert not old.exists() and not older.exists() and not stray.exists()
    assert young.exists() and touched.exists()
    assert (young / "runs" / "j-0a1b2c3d" / "branches" / "data").read_text() == "x" * 100


def test_never_keeps_the_whole_trash(tmp_path: Path) -> None:
    home = tmp_path / "home"
    open_home(home, 7)
    old = entry(home, "20200101T000000-aaaaaa", age_days=2000)
    open_home(home, None)
    assert old.exists()


def test_what_an_open_moves_to_the_trash_stays_there_until_it_is_old(tmp_path: Path) -> None:
    """A crash's leftover goes to the trash on one open and is not removed by the next, even with
    a very short setting (an hour here), since it was moved there just now."""
    home = tmp_path / "home"
    open_home(home, 7)
    (home / "runs" / "j-0a1b2c3d").mkdir(parents=True)  # a run folder of no job
    open_home(home, 1 / 24)
    [moved] = (home / TRASH).glob("*/runs/j-0a1b2c3d")
    open_home(home, 1 / 24)
    assert moved.is_dir()


@pytest.mark.parametrize(("value", "days"), [("7", 7.0), ("0.5", 0.5), (" never ", None), ("NEVER", None)])
def test_trash_days_setting_takes_days_or_never(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, days: float | None
) -> None:
    monkeypatch.setenv("PITSTOP_TRASH_DAYS", value)
    assert Settings.resolve(tmp_path).trash_days == days


@pytest.mark.parametrize("value", ["0", "-1", "soon", "", "inf", "nan"])
def test_a_wrong_trash_days_setting_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str
) -> None:
    monkeypatch.setenv("PITSTOP_TRASH_DAYS", value)
    with pytest.raises(PitstopError, match=r"PITSTOP_TRASH_DAYS is .*; it takes a number of days > 0"):
        Settings.resolve(tmp_path)


def test_the_cli_refuses_a_wrong_trash_days_setting_without_touching_the_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = subprocess.run(
        [sys.executable, "-m", "pitstop.cli", "--home", str(home), "run", "-c", "SHOW JOBS;"],
        capture_output=True,
        text=True,
        env={**os.environ, "PITSTOP_TRASH_DAYS": "0"},
        timeout=120,
    )
    assert done.returncode == 2
    assert "ERROR: PITSTOP_TRASH_DAYS is '0'; it takes a number of days > 0" in done.stderr
    assert not home.exists()
