"""What pitstop checks for a cluster, without one: the settings, and what the probe task reports
from the folders it is given (the probe runs on executors; here in this process, on real files).
The checks on a real standalone cluster are in test_cluster.py (make cluster-test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pitstop
from pitstop.engine.cluster import Executor, Placement, probe
from pitstop.errors import PitstopError
from pitstop.settings import Settings, is_local


@pytest.mark.parametrize(
    ("master", "local"),
    [("local", True), ("local[2]", True), ("local[*]", True), ("local[2,4]", True)]
    + [("spark://h:7077", False), ("yarn", False), ("localhost", False)],
)
def test_local_masters_are_told_from_cluster_ones(master: str, local: bool) -> None:
    assert is_local(master) is local


def test_cluster_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PITSTOP_EXECUTOR_MEMORY", "512M")
    monkeypatch.setenv("PITSTOP_EXECUTOR_WAIT_S", "30")
    monkeypatch.setenv("PITSTOP_SPARK_UI", "on")
    monkeypatch.delenv("PITSTOP_SHUFFLE_PARTITIONS", raising=False)
    s = Settings.resolve(tmp_path, " spark://h:7077 ")
    assert (s.master, s.local, s.executor_memory, s.executor_wait_s, s.ui) == (
        "spark://h:7077",
        False,
        "512m",
        30,
        True,
    )
    assert s.shuffle_partitions is None  # the executors' cores, once they register
    monkeypatch.setenv("PITSTOP_SPARK_UI", "auto")
    assert Settings.resolve(tmp_path, "spark://h:7077").ui is True
    assert Settings.resolve(tmp_path, "local[2]").ui is False


@pytest.mark.parametrize(
    ("env", "value", "says"),
    [
        ("PITSTOP_EXECUTOR_MEMORY", "lots", "e.g. 512m or 2g"),
        ("PITSTOP_DRIVER_MEMORY", "2 GB", "e.g. 512m or 2g"),
        ("PITSTOP_EXECUTOR_WAIT_S", "0", "a whole number > 0"),
        ("PITSTOP_SPARK_UI", "maybe", "on, off or auto"),
        ("PITSTOP_SHUFFLE_PARTITIONS", "-1", "a whole number > 0"),
    ],
)
def test_a_wrong_cluster_setting_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: str, value: str, says: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(PitstopError, match=f"{env} is '{value}'; .*{says}"):
        Settings.resolve(tmp_path)


def _probe(paths: dict[str, str], token: str | None) -> dict[str, object]:
    return dict(json.loads(probe(json.dumps({"paths": paths, "token": token}))))


def test_the_probe_sees_the_drivers_token_and_writes_one_back(tmp_path: Path) -> None:
    (tmp_path / "driver").write_text("t0k3n")
    report = _probe({"home": str(tmp_path)}, "t0k3n")
    assert report["home"] == "same"
    assert report["pitstop"] == pitstop.__version__
    assert report["missing"] == []
    assert (tmp_path / str(report["wrote"])).read_text() == "seen"


def test_the_probe_tells_a_home_that_is_missing_or_another_folder(tmp_path: Path) -> None:
    assert str(_probe({"home": str(tmp_path / "absent")}, "t")["home"]).startswith("not found there")
    (tmp_path / "driver").write_text("another machine's token")
    report = _probe({"home": str(tmp_path)}, "t")
    assert report["home"] == "a different folder of the same name"
    assert report["wrote"] == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["driver"]


def test_the_probe_tells_which_source_folders_it_sees(tmp_path: Path) -> None:
    (tmp_path / "orders").mkdir()
    report = _probe({"orders": str(tmp_path / "orders"), "clicks": str(tmp_path / "clicks")}, None)
    assert report["folders"] == {"orders": True, "clicks": False}


def test_placement_says_master_executors_and_ui() -> None:
    two = Placement(
        "spark://h:7077",
        (Executor("0", "10.0.0.2:4711", 1), Executor("1", "10.0.0.3:4712", 2)),
        "http://d:4040",
    )
    assert two.where() == "spark://h:7077 (2 executor(s), 3 cores)"
    assert two.executor_text() == "0 at 10.0.0.2:4711 (1 core), 1 at 10.0.0.3:4712 (2 cores)"
    assert two.ui_text() == "http://d:4040"
    local = Placement("local[2]", (), None, local_cores=2)
    assert local.where() == "local[2] (in the pitstop process, 2 cores)"
    assert local.executor_text() == "none: tasks run in the pitstop process"
    assert local.ui_text().startswith("off (PITSTOP_SPARK_UI=on")
