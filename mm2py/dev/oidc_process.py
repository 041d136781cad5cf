"""The dev OIDC provider (mm2py.dev.oidc) as a detached process beside a dev cluster's brokers.

``mm2py dev-cluster up --sasl-mechanism OAUTHBEARER`` starts one per cluster, kept in the
cluster's folder (``oidc.pid``, ``oidc.log``), so that it outlives the command as the brokers do;
``stop_cluster`` stops it with them. Its client secret is made per start and reaches the process
through its environment, never its command line; the clients read it from client.properties.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from mm2py.errors import DevClusterError

CLIENT_ID = "mm2"
CLIENTS_ENV = "MM2PY_DEV_OIDC_CLIENTS"  # id=secret[,id=secret...]: read by mm2py.dev.oidc's main


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as answer:
            return answer.status == 200
    except OSError:
        return False


def start_oidc(directory: Path, port: int, lifetime_s: float, timeout: float = 30) -> tuple[str, str, str]:
    """Start the provider on 127.0.0.1:``port``; returns (token URL, JWKS URL, client secret)."""
    stop_oidc(directory)
    directory.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(18)
    env = dict(os.environ, **{CLIENTS_ENV: f"{CLIENT_ID}={secret}"})
    with open(directory / "oidc.log", "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mm2py.dev.oidc", "--port", str(port),
                                 "--lifetime", str(lifetime_s)], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    (directory / "oidc.pid").write_text(f"{proc.pid}\n")
    jwks = f"http://127.0.0.1:{port}/jwks"
    deadline = time.monotonic() + timeout
    while not _answers(jwks):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_oidc(directory)
            log = (directory / "oidc.log").read_text(errors="replace")[-2000:]
            raise DevClusterError(f"the dev OIDC provider did not start on port {port}:\n{log}")
        time.sleep(0.2)
    return f"http://127.0.0.1:{port}/token", jwks, secret


def stop_oidc(directory: Path) -> bool:
    """Stop the provider of the cluster in ``directory``, if one runs; True when one was stopped."""
    pid_file = directory / "oidc.pid"
    if not pid_file.exists():
        return False
    text = pid_file.read_text().strip()
    pid_file.unlink(missing_ok=True)
    try:
        cmdline = Path(f"/proc/{text}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    if b"mm2py.dev.oidc" not in cmdline:
        return False  # the pid was reused by another process
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(text), signal.SIGTERM)
    return True
