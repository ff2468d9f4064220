"""pitstop's one log setup (pitstop.logs), in a process of its own: the whole text in the home's
log file, one line per record on the terminal. No Spark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
