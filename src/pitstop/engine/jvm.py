"""A class-data archive of Spark's JVM: Spark starts on less CPU once it exists.

Each pitstop process that runs a job starts a JVM that loads and verifies some 15,000 of Spark's
classes before its first batch. The JDK can record them once, parsed and verified, in an archive
file (class-data sharing, ``-XX:ArchiveClassesAtExit`` then ``-XX:SharedArchiveFile``, JDK 13
and later); every later JVM maps it. Measured here (a ``pitstop run`` of a windowed job over two
files, every process of it counted, 2 cores): ~17.5 CPU-s without, ~12 with (bench/RESULTS.md).

``pitstop prepare`` records it (:mod:`pitstop.prepare`; ``make`` runs it) in the user's cache
folder, named after what it was made from (the Java binary; pyspark's version, jars and where they
are), so an upgrade of either, or another virtual environment, makes a new one. A JVM that finds
an archive it cannot use (made by another JDK build, or jars changed in place) says so in
``<home>/logs/spark.log`` and starts as it would without one: the archive only ever saves time.

Also :func:`spark_class`: a Spark class by the names it has had across pyspark versions, for the
few places that read the JVM's objects (late rows' operator figures, the streams' clocks).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

ENV = "SPARK_SUBMIT_OPTS"  # Spark's launcher adds it to the driver JVM's options


def java_binary() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def cache_folder() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("pitstop")) / "jvm"


def archive_path() -> Path | None:
    """Where this machine's archive is (whether or not it exists yet); None without a ``java``."""
    java = java_binary()
    if java is None:
        return None
    import pyspark

    jars = jars_folder()
    key = hashlib.sha256()
    stat = java.stat()
    # The JVM checks the archive's class path against its own: the jars' folder is part of the name.
    key.update(f"{java}\0{stat.st_size}\0{stat.st_mtime_ns}\0{pyspark.__version__}\0{jars}\0".encode())
    for jar in sorted(jars.glob("*.jar")):
        key.update(f"{jar.name}\0{jar.stat().st_size}\0".encode())
    return cache_folder() / f"spark-{pyspark.__version__}-{key.hexdigest()[:16]}.jsa"


def jars_folder() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def record_origin(path: Path) -> None:
    """Beside a new archive, the jars' folder it was made for (:func:`remove_stale` reads it)."""
    path.with_suffix(".json").write_text(json.dumps({"jars": str(jars_folder())}))


def remove_stale() -> list[Path]:
    """Remove the archives made for a jars' folder that is gone (a virtual environment deleted,
    pyspark upgraded): each is ~190 MB. Returns the archives removed; one without its record is
    left alone."""
    removed = []
    for record in sorted(cache_folder().glob("*.json")):
        try:
            jars = Path(json.loads(record.read_text())["jars"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        archive = record.with_suffix(".jsa")
        if not jars.is_dir():
            archive.unlink(missing_ok=True)
            record.unlink(missing_ok=True)
            removed.append(archive)
    return removed


def options() -> str:
    """The driver JVM's option that maps the archive, or "" when there is none."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path}" if path is not None and path.is_file() else ""


def submit_opts() -> str | None:
    """``SPARK_SUBMIT_OPTS`` with the archive's option added (None: nothing to add)."""
    option = options()
    current = os.environ.get(ENV, "")
    if not option or "SharedArchiveFile" in current or "ArchiveClassesAtExit" in current:
        return None
    return f"{current} {option}".strip()


def spark_class(session: Any, names: tuple[str, ...]) -> Any:
    """The first of ``names`` (one Spark class under the packages it has had) that the JVM of
    ``session`` (a JVM SparkSession) loads; None if none (pyspark moved some in 4.1)."""
    loader = session.getClass().getClassLoader()
    for name in names:
        try:
            return loader.loadClass(name)
        except Exception:  # noqa: BLE001 - py4j raises Py4JJavaError for ClassNotFoundException
            continue
    return None
