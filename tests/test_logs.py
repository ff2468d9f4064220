"""pitstop's one log setup (pitstop.logs), in a process of its own: the whole text in the home's
log file, one line per record on the terminal. No Spark."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = """
import logging, sys
from pathlib import Path
from pitstop import logs
logs.terminal(verbose=False)
path = logs.to_home(Path(sys.argv[1]))
log = logging.getLogger("pitstop.demo")
log.info("an info line")
log.warning("a warning\\nwith a second line")
try:
    raise ValueError("boom")
except ValueError:
    log.error("a failure", exc_info=True)
    log.error("said by the front end already", exc_info=True, extra=logs.FILE_ONLY)
logging.getLogger("py4j.clientserver").error("the Python Proxy raised")
print(path)
"""


def test_the_file_has_the_whole_text_and_the_terminal_one_line_each(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path / "home")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    log = Path(done.stdout.strip())
    assert log == (tmp_path / "home" / "logs" / "pitstop.log").resolve()
    assert done.stderr.splitlines() == [
        f"WARNING pitstop.demo: a warning (more; the whole text is in {log})",
        f"ERROR pitstop.demo: a failure (more; the whole text is in {log})",
    ]
    text = log.read_text()
    for line in ("an info line", "with a second line", "ValueError: boom", "said by the front end already"):
        assert line in text
    assert text.count("Traceback") == 2 and "the Python Proxy raised" in text


FULL_DISK = """
import errno, logging, sys
from pathlib import Path
from pitstop import logs
logs.terminal(verbose=False)
path = logs.to_home(Path(sys.argv[1]))
log = logging.getLogger("pitstop.demo")
log.info("before the disk fills")
filler = path.parent / "filler"  # beside the log, on the same small file system: fill it
with open(filler, "wb", buffering=0) as f:
    try:
        while True:
            f.write(b"x" * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
for i in range(30):  # the first few fit in the log file's last page; the rest do not
    log.info("line %02d %s", i, "p" * 400)
log.warning("a warning while the disk is full")
filler.unlink()
log.info("after the disk has room again")
sys.stdout.write(path.read_text())
"""


def _in_a_small_file_system(folder: Path, *command: str) -> list[str]:
    """``command`` in a mount namespace of its own (``unshare``: as root, or as a user where user
    namespaces are allowed) where ``folder`` is a 64 KiB tmpfs; the mount goes with the process."""
    mount = 'mount -t tmpfs -o size=64k pitstop-test "$1" && shift && exec "$@"'
    return ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", mount, "sh", str(folder), *command]


def test_a_full_disk_under_the_log_is_said_once_and_the_lost_lines_are_counted(tmp_path: Path) -> None:
    """A real full disk (a 64 KiB tmpfs under ``<home>/logs``): Python's logging printed
    "--- Logging error ---" and a traceback to the terminal for every line it could not write.
    Now the terminal is told once, the lines are dropped, and once the disk has room the log says
    how many were lost, then goes on."""
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    probe = subprocess.run(_in_a_small_file_system(home / "logs", "true"), capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (unshare and mount: {probe.stderr.strip()})")
    done = subprocess.run(
        _in_a_small_file_system(home / "logs", sys.executable, "-c", FULL_DISK, str(home)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    path = (home / "logs" / "pitstop.log").resolve()
    assert done.stderr.splitlines() == [
        f"WARNING pitstop.logs: the log {path} could not be written: no space left on device; its lines "
        "are dropped until it can be written again, and it will say how many were lost",
        "WARNING pitstop.demo: a warning while the disk is full",
    ]
    lines = done.stdout.splitlines()
    assert "before the disk fills" in lines[0]
    written = [n for n in range(30) if any(line.endswith(f"line {n:02d} {'p' * 400}") for line in lines)]
    assert written == list(range(len(written))) and len(written) < 30  # the disk did fill up
    lost = 30 - len(written) + 1  # and the warning
    [note] = [i for i, line in enumerate(lines) if "log line(s) lost" in line]
    assert re.fullmatch(
        rf"\S+ \S+ WARNING \S+ pitstop\.logs: {lost} log line\(s\) lost from \S+ \S+ to \S+ \S+: "
        rf"{re.escape(str(path))} could not be written \(no space left on device\)",
        lines[note],
    ), lines[note]
    assert lines[note + 1].endswith("pitstop.demo: after the disk has room again")
    assert note + 2 == len(lines)
