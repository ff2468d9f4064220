"""The ``pitstop`` command as tests run it: in this process by default (click's ``CliRunner``, on
the test run's one Spark session), or as a real process where a test needs one: kill -9, signals,
the real process's exit, stdin of a real process, two processes at once.

Either way it runs with the test run's settings (conftest.settings: ``local[2]``, 2 shuffle
partitions, a 200 ms trigger), passed as the environment variables a user would set. Spark is one
session per process and its master is fixed when it starts, so the command in this process uses
the session the other tests use; a real process starts its own JVM (15-35 s on 2 cores).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from conftest import settings, wait_until_gone
from pitstop import faults, logs

_SCRIPT = Path(sys.executable).with_name("pitstop")  # the console script, as installed
_SUITE = settings(Path("unused"))
SUITE_ENV: dict[str, str | None] = {
    "PITSTOP_SPARK_MASTER": _SUITE.master,
    "PITSTOP_SHUFFLE_PARTITIONS": str(_SUITE.shuffle_partitions),
    "PITSTOP_TRIGGER_MS": str(_SUITE.trigger_ms),
    # Each test says where its home is and whether a server is used; a fault is injected by name.
    "PITSTOP_HOME": None,
    "PITSTOP_CONNECT": None,
    faults.CRASH_ENV: None,
    faults.FAULT_ENV: None,
}
"""What every ``pitstop`` a test runs finds in its environment (None: not set)."""


@dataclass(frozen=True)
class Done:
    """How a ``pitstop`` command ended."""

    returncode: int
    stdout: str
    stderr: str
    took_s: float = 0.0
    """A real process: from its start to its end (0 in this process)."""
    gone_s: float = 0.0
    """A real process: from its end until every process it started (Spark's JVM, Python workers)
    was gone too (0 in this process)."""


def command(*args: str, home: Path | None = None) -> list[str]:
    """The real ``pitstop`` command line: the installed script, or ``python -m pitstop.cli``."""
    program = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "pitstop.cli"]
    return [*program, *(["--home", str(home)] if home is not None else []), *args]


def environment(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """This process's environment, with :data:`SUITE_ENV` and then ``env`` over it."""
    out = dict(os.environ)
    for key, value in {**SUITE_ENV, **(env or {})}.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def start(
    *args: str,
    home: Path | None = None,
    env: Mapping[str, str | None] | None = None,
    **popen: Any,
) -> subprocess.Popen[str]:
    """``pitstop ...`` as a real process, in a session of its own (its process group is what
    :func:`conftest.wait_until_gone` waits for), left running; ``popen`` goes to ``Popen``."""
    if home is not None and home.parent.is_dir():
        popen.setdefault("cwd", home.parent)  # where a JVM killed mid-write leaves its hs_err_pid*.log
    return subprocess.Popen(
        command(*args, home=home), env=environment(env), text=True, start_new_session=True, **popen
    )


def pitstop(
    *args: str,
    home: Path | None = None,
    stdin: str | None = None,
    env: Mapping[str, str | None] | None = None,
    process: bool = False,
    timeout: float = 300,
) -> Done:
    """Run ``pitstop [--home home] args...`` to its end, with ``stdin`` as its standard input.

    In this process unless ``process``; a real process returns once it and every process it
    started are gone (``timeout``: seconds before it is killed and the test fails)."""
    if process:
        return _process(args, home, stdin, env, timeout)
    if (env or {}).get(faults.CRASH_ENV):
        raise ValueError(f"{faults.CRASH_ENV} kills the process it is in: pass process=True")
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("pitstop sets signal handlers, which only the main thread may: pass process=True")
    from pitstop.cli import main

    argv = [*(["--home", str(home)] if home is not None else []), *args]
    with _process_state_kept():
        result = CliRunner().invoke(
            main,
            argv,
            input=stdin,
            env={**SUITE_ENV, **(env or {})},
            catch_exceptions=False,  # a crash is the test's failure, with its traceback
            prog_name="pitstop",
        )
    return Done(result.exit_code, result.stdout, result.stderr)


def _process(
    args: tuple[str, ...],
    home: Path | None,
    stdin: str | None,
    env: Mapping[str, str | None] | None,
    timeout: float,
) -> Done:
    began = time.monotonic()
    proc = start(
        *args,
        home=home,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    finally:
        ended = time.monotonic()
        wait_until_gone(proc.pid)
    return Done(proc.returncode, out, err, ended - began, time.monotonic() - ended)


@contextmanager
def _process_state_kept() -> Iterator[None]:
    """What the command changes for the whole process, put back after it: its log handlers (the
    terminal's, bound to CliRunner's stderr, and a file per home) and its SIGTERM and SIGINT
    handlers (``pitstop serve`` sets both)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    terminal, files = logs._terminal, dict(logs._files)
    sigterm, sigint = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, sigterm)
        if sigint is not None:
            signal.signal(signal.SIGINT, sigint)
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.setLevel(level)
        logs._terminal = terminal
        logs._files.clear()
        logs._files.update(files)
