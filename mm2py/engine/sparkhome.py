"""A SPARK_HOME for pip-installed PySpark whose Python workers import compiled modules.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python worker's path. Python
cannot cache bytecode for modules imported from a zip, so each worker process, and each of the
short-lived planner processes a Python data source starts per micro-batch, recompiles PySpark
from source (docs/design.md has the profile). This home has the
same ``bin``, ``jars`` and ``sbin`` (links into the installed package) but no ``pyspark.zip``,
so workers import the installed package, whose ``__pycache__`` holds the compiled modules.

Both this home and the overlay of an operator's own SPARK_HOME (``use_lean_spark_home``) start
the driver JVM through ``bin/spark-submit`` written here (``SUBMIT``), which ignores SIGINT and
SIGTERM before it hands over to Spark's own script. A signal to mm2py's process group (Ctrl-C,
``kill -- -PGID``) or to every process of a systemd unit then leaves the JVM running, and mm2py
stops it in order once the running micro-batches committed (mm2py.engine.watch). Ignored
signals stay ignored across ``exec``, and the JVM keeps a shutdown signal that it found ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

import pyspark

PACKAGE = Path(pyspark.__file__).resolve().parent
LINKED = ("jars", "sbin")
LAYOUT = "2"  # bumped when what a home holds changes, so an older cached home is not reused
# the driver JVM's launcher: deaf to the signals mm2py handles, then Spark's own script
SUBMIT = """#!/usr/bin/env bash
# Written by mm2py (mm2py.engine.sparkhome): the Spark JVM ignores SIGINT and SIGTERM, so a signal
# to the whole process group reaches mm2py alone in effect, and mm2py stops Spark in order.
trap '' INT TERM
exec "{real}" "$@"
"""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    root = Path(base) / "mm2py"
    try:
        root.mkdir(parents=True, exist_ok=True)
        return root
    except OSError:  # a read-only home: a per-user temporary folder still works
        return Path(tempfile.gettempdir()) / f"mm2py-{os.getuid()}"


def lean_spark_home(package: Path = PACKAGE) -> Path:
    """Create (once) and return the lean home for ``package``; safe to call from many processes."""
    tag = hashlib.sha1(str(package).encode()).hexdigest()[:10]
    home = cache_root() / f"spark-home-{pyspark.__version__}-{tag}-{LAYOUT}"
    if (home / ".complete").exists():
        return home
    lib = home / "python" / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    targets = {home / name: package / name for name in LINKED}
    targets.update({lib / zip_.name: zip_ for zip_ in (package / "python" / "lib").glob("py4j-*.zip")})
    _link_all(targets)
    _bin_with_submit(home, package / "bin")
    (home / ".complete").touch()
    return home


def overlay_home(base: Path) -> Path:
    """Create (once) and return a home with everything of ``base`` but its own ``bin/spark-submit``."""
    tag = hashlib.sha1(str(base).encode()).hexdigest()[:10]
    home = cache_root() / f"spark-overlay-{tag}-{LAYOUT}"
    if (home / ".complete").exists():
        return home
    home.mkdir(parents=True, exist_ok=True)
    _link_all({home / entry.name: entry for entry in base.iterdir() if entry.name != "bin"})
    _bin_with_submit(home, base / "bin")
    (home / ".complete").touch()
    return home


def _link_all(targets: dict[Path, Path]) -> None:
    for link, target in targets.items():
        if not link.is_symlink():
            with contextlib.suppress(FileExistsError):  # another process made it first
                link.symlink_to(target)


def _bin_with_submit(home: Path, real_bin: Path) -> None:
    """``home/bin``: links to every script of ``real_bin`` but ``spark-submit``, which is ``SUBMIT``."""
    bin_ = home / "bin"
    bin_.mkdir(exist_ok=True)
    _link_all({bin_ / entry.name: entry for entry in real_bin.iterdir() if entry.name != "spark-submit"})
    submit = bin_ / "spark-submit"
    partial = bin_ / f".spark-submit.{os.getpid()}"
    partial.write_text(SUBMIT.format(real=real_bin / "spark-submit"))
    partial.chmod(0o755)
    partial.replace(submit)  # atomic: a concurrent start sees the whole script or none


def use_lean_spark_home() -> str:
    """Point this process (and the Spark JVM it starts) at the lean home, or at an overlay of SPARK_HOME.

    An operator's own SPARK_HOME (a Spark distribution) keeps everything it holds; only its
    ``spark-submit`` is started through ``SUBMIT``. Returns the home in use.
    """
    current = os.environ.get("SPARK_HOME")
    if current and (current_path := Path(current).resolve()) != PACKAGE:
        if current_path.parent == cache_root().resolve():
            return current  # a home of ours already (set by an earlier call in this process)
        home = str(overlay_home(current_path))
    else:
        home = str(lean_spark_home())
    os.environ["SPARK_HOME"] = home
    return home
