"""Each error class declares its SQLSTATE; the server answers with it and a client maps it back
to the class (no message text is read to choose a code). No Spark."""

from __future__ import annotations

import re

import pytest

from conftest import run
from pitstop import remote
from pitstop.driver import Driver
from pitstop.errors import (
    CancelledError,
    CatalogError,
    DuplicateObjectError,
    NotSupportedError,
    PitstopError,
    UnknownObjectError,
    UnknownOptionError,
    all_errors,
)
from pitstop.executor import Executor
from pitstop.manager import Manager
from pitstop.server.sqlstate import code_of


def test_every_class_has_a_sqlstate_and_a_client_maps_each_code_to_a_class_of_that_code() -> None:
    for cls in all_errors():
        assert re.fullmatch(r"[0-9A-Z]{5}", cls.sqlstate), cls
        assert remote._ERRORS[cls.sqlstate].sqlstate == cls.sqlstate
    assert remote._ERRORS["57014"] is CancelledError and remote._ERRORS["XX000"] is PitstopError


@pytest.mark.parametrize(
    ("sql", "cls", "code"),
    [
        ("DROP MAPPING nowhere", UnknownObjectError, "42704"),
        ("DROP JOB nothing", UnknownObjectError, "42704"),
        ("CREATE MAPPING m TYPE Console; CREATE MAPPING m TYPE Console", DuplicateObjectError, "42710"),
        ("SET 'trigger_msec' = '10'", UnknownOptionError, "42704"),
        (
            "CREATE MAPPING s (n BIGINT) TYPE Generator; CREATE MAPPING o TYPE Console; "
            "CREATE JOB j AS INSERT INTO o SELECT * FROM s ORDER BY 1",
            NotSupportedError,
            "0A000",
        ),
    ],
)
def test_a_statements_error_comes_as_the_class_of_its_code(
    manager: Manager, sql: str, cls: type[PitstopError], code: str
) -> None:
    with pytest.raises(PitstopError) as caught:
        run(manager, sql)
    assert type(caught.value) is cls and code_of(caught.value) == code


def test_a_catalog_error_of_no_narrower_kind_keeps_the_prerequisite_code() -> None:
    assert code_of(CatalogError("mapping 'orders' is used by job 'revenue'")) == "55000"


def test_the_caret_stands_under_the_name_an_error_is_about() -> None:
    """Errors about a name pointed at the statement's start (issue 25): now at the name, on the
    line it is on, quoted or not; the keyword JOB is not the job named job."""
    script = (
        "SHOW JOBS;\nCREATE MAPPING g (id BIGINT, ts TIMESTAMP)\n"
        "  TYPE Generator OPTIONS ('rowsPerSecond'='50');\nDROP JOB job;"
    )
    ex = Driver(Executor(None))
    ok, errors = ex.check(script)
    assert [(e.line, e.col) for e in errors] == [(3, 27), (4, 10)]
    assert str(errors[0]).endswith("\n    TYPE Generator OPTIONS ('rowsPerSecond'='50')\n" + " " * 28 + "^")
    assert errors[1].message.startswith("unknown job 'job'")
