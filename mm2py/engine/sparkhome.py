"""A SPARK_HOME for pip-installed PySpark whose Python workers import compiled modules.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python worker's path. Python
cannot cache bytecode for modules imported from a zip, so each worker process, and each of the
short-lived planner processes a Python data source starts per micro-batch, recompiles PySpark
from source (docs/design.md has the profile). This home has the
same ``bin``, ``jars`` and ``sbin`` (links into the installed package) but no ``pyspark.zip``,
so workers import the installed package, whose ``__pycache__`` holds the compiled modules.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

import pyspark

PACKAGE = Path(pyspark.__file__).resolve().parent
LINKED = ("bin", "jars", "sbin")


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
    home = cache_root() / f"spark-home-{pyspark.__version__}-{tag}"
    if (home / ".complete").exists():
        return home
    lib = home / "python" / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    targets = {home / name: package / name for name in LINKED}
    targets.update({lib / zip_.name: zip_ for zip_ in (package / "python" / "lib").glob("py4j-*.zip")})
    for link, target in targets.items():
        if not link.is_symlink():
            with contextlib.suppress(FileExistsError):  # another process made it first
                link.symlink_to(target)
    (home / ".complete").touch()
    return home


def use_lean_spark_home() -> str:
    """Point this process (and the Spark JVM it starts) at the lean home, unless SPARK_HOME is set.

    An operator's own SPARK_HOME (a Spark distribution) is left alone. Returns the home in use.
    """
    current = os.environ.get("SPARK_HOME")
    if current and Path(current).resolve() != PACKAGE:
        return current
    home = str(lean_spark_home())
    os.environ["SPARK_HOME"] = home
    return home
