"""The connector seam: each mapping type's declared options check CREATE MAPPING, complete in the
shell, and document \\help CREATE MAPPING and the README; nothing else in pitstop lists the types.

Real DuckDB catalogs in a tmp home; no Spark (a catalog statement never starts it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run
from pitstop.connectors import registry
from pitstop.errors import PlanError
from pitstop.manager import Manager

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
SRC = Path(__file__).resolve().parent.parent / "src" / "pitstop"


def refusal(manager: Manager, script: str) -> str:
    with pytest.raises(PlanError) as caught:
        run(manager, script)
    return caught.value.message


def stored_options(manager: Manager, name: str) -> dict[str, str]:
    mapping = manager.catalog.get_mapping(name)
    assert mapping is not None
    return mapping.options


def test_a_misspelt_option_is_refused_with_did_you_mean(manager: Manager, tmp_path: Path) -> None:
    message = refusal(
        manager,
        f"CREATE MAPPING orders (id BIGINT) TYPE File OPTIONS ('path'='{tmp_path}/o', 'formt'='csv');",
    )
    assert message == "mapping 'orders' (TYPE File): unknown option 'formt' (did you mean 'format'?)"
    assert manager.catalog.get_mapping("orders") is None
    assert not (tmp_path / "o").exists()


def test_an_option_of_another_type_lists_the_options_this_type_takes(manager: Manager) -> None:
    message = refusal(manager, "CREATE MAPPING out TYPE DuckDB OPTIONS ('path'='/tmp/x');")
    assert message == "mapping 'out' (TYPE DuckDB): unknown option 'path'; TYPE DuckDB takes 'table'"
    message = refusal(manager, "CREATE MAPPING out TYPE Console OPTIONS ('table'='t');")
    assert message == "mapping 'out' (TYPE Console): unknown option 'table'; TYPE Console takes no options"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ("'format'='xml'", "option 'format' is 'xml'; it takes json | csv | parquet"),
        ("'header'='yes'", "option 'header' is 'yes'; it takes true | false"),
    ],
)
def test_a_wrong_file_option_value_names_the_option_and_what_it_takes(
    manager: Manager, tmp_path: Path, options: str, expected: str
) -> None:
    message = refusal(
        manager, f"CREATE MAPPING orders (id BIGINT) TYPE File OPTIONS ('path'='{tmp_path}/o', {options});"
    )
    assert message == f"mapping 'orders' (TYPE File): {expected}"


@pytest.mark.parametrize(
    ("option", "value", "takes"),
    [
        ("rate", "0", "a number > 0"),
        ("rate", "fast", "a number > 0"),
        ("limit", "2.5", "a whole number > 0"),
        ("keys", "-1", "a whole number > 0"),
        ("start", "yesterday", "a time 'YYYY-MM-DD HH:MM:SS' (UTC)"),
        ("max_per_batch", "0", "a whole number > 0"),
    ],
)
def test_a_wrong_generator_option_value_is_refused(
    manager: Manager, option: str, value: str, takes: str
) -> None:
    message = refusal(
        manager, f"CREATE MAPPING g (n BIGINT, ts TIMESTAMP) TYPE Generator OPTIONS ('{option}'='{value}');"
    )
    assert message == f"mapping 'g' (TYPE Generator): option '{option}' is '{value}'; it takes {takes}"


def test_options_are_stored_as_declared(
    manager: Manager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Choices in any case are stored as declared; a relative path is stored absolute; option
    names match in any case and are stored as declared; defaults are not written in."""
    monkeypatch.chdir(tmp_path)
    run(
        manager, "CREATE MAPPING orders (id BIGINT) TYPE File OPTIONS ('PATH'='data/orders', 'Format'='CSV');"
    )
    assert stored_options(manager, "orders") == {"path": str(tmp_path / "data" / "orders"), "format": "csv"}
    assert (tmp_path / "data" / "orders").is_dir()
    run(manager, "CREATE MAPPING g (n BIGINT) TYPE Generator OPTIONS ('rate'='50', 'limit'='100');")
    assert stored_options(manager, "g") == {"rate": "50", "limit": "100"}


def test_a_file_mapping_without_its_path_says_which_option_to_add(manager: Manager) -> None:
    message = refusal(manager, "CREATE MAPPING orders (id BIGINT) TYPE File OPTIONS ('format'='csv');")
    assert message.startswith("mapping 'orders': TYPE File needs OPTIONS ('path'='...'): the folder")


def test_help_create_mapping_lists_every_declared_option() -> None:
    text = registry.help_text()
    for connector in registry.CONNECTORS:
        assert f"TYPE {connector.type_name} ({connector.roles()})" in text
        for option in connector.options:
            assert f"'{option.name}'  {option.help}" in text


def test_the_readme_table_of_mapping_types_is_the_declarations() -> None:
    assert registry.readme_table() in README


def test_the_shell_completes_every_declared_option() -> None:
    from pitstop.shell.completion import MAPPING_OPTIONS

    declared = {o.name for c in registry.CONNECTORS for o in c.options}
    assert set(MAPPING_OPTIONS) == declared


def test_no_module_outside_the_connectors_lists_the_mapping_types() -> None:
    """The seam's point: dialect, executor, planner, engine, snapshots and shell ask the registry."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if "connectors" in path.parts or "server" in path.parts:
            continue
        text = path.read_text()
        for needle in ('mapping.type == "', "mapping.type == '", '"Generator", "Console"', '("file", "'):
            if needle in text:
                offenders.append(f"{path.relative_to(SRC)}: {needle}")
    assert offenders == []


def test_positions_are_opaque_json_from_the_offset_log_to_the_fence(tmp_path: Path) -> None:
    """A connector's position may be any JSON value (a partition -> offset map for a partitioned
    source): the offset log, the fence and the restore path pass it through unchanged."""
    from pitstop.connectors import positions
    from pitstop.engine import checkpoint

    partitioned = {"0": 17, "1": 4, "2": 0}
    line = '{"source": "clicks", "pos": {"0": 17, "1": 4, "2": 0}}'
    assert positions.parse_offset(line) == ("clicks", partitioned)
    positions.write_fence(tmp_path, partitioned)
    assert positions.read_fence(tmp_path) == partitioned
    positions.write_fence(tmp_path, 12)
    assert positions.read_fence(tmp_path) == 12
    ckpt = tmp_path / "ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "commits").mkdir()
    (ckpt / "offsets" / "0").write_text(
        'v1\n{"batchWatermarkMs":0}\n' + line + '\n{"source": "orders", "pos": 3}'
    )
    (ckpt / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    progress = checkpoint.progress(ckpt, {"clicks": {"0": 0}})
    assert progress.positions == {"clicks": partitioned, "orders": 3}
    assert progress.committed == 0 and progress.settled


def test_a_counting_source_compares_and_combines_by_count() -> None:
    counts = registry.connector("file").positions
    assert counts.furthest(3, 7) == 7 and counts.least(3, 7) == 3
    assert counts.covers(7, 7) and not counts.covers(6, 7)
    assert counts.text(1234, "files") == "1,234 files"


def test_a_kafka_source_keeps_its_offsets_across_new_servers_not_across_another_topic() -> None:
    """Seed 001: changing the connection parameters keeps the positions; another topic is another
    source, read from 'auto.offset.reset', and EXPLAIN says so."""
    from pitstop.catalog.rows import Mapping

    kafka = registry.connector("kafka")
    entry = {"type": "kafka", "pos": {"0": 17, "1": 4}, "topic": "clicks"}

    def mapping(**options: str) -> Mapping:
        return Mapping("clicks", "kafka", (), None, {"bootstrap.servers": "10.0.0.2:9092", **options})

    kept, note = kafka.resume_from(entry, mapping(topic="clicks"))
    assert kept == entry
    assert note.startswith("goes on from the snapshot's offsets (2 partitions, 21 records")
    fresh, note = kafka.resume_from(entry, mapping(topic="clicks_v2", **{"auto.offset.reset": "latest"}))
    assert fresh["pos"] == {} and fresh["topic"] == "clicks_v2"
    assert note == (
        "topic changed from 'clicks' to 'clicks_v2': another topic is another source; reads from "
        "'auto.offset.reset' (latest)"
    )
