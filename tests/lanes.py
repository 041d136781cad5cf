"""``make test``: the suite in three lanes, so that the scenarios that mostly wait do not add up.

Tests marked ``long`` (broker restarts, a three-minute outage, crash loops: minutes spent waiting
on brokers, not on the CPU) run in a second pytest process beside the rest. The lanes never
meet: the long lane's clusters, registries and metrics listen ``LONG_LANE_OFFSET`` ports lower
(``MM2PY_TEST_PORT_OFFSET``) and each lane has its own temporary directory.

Tests marked ``krb_clients`` need confluent-kafka with GSSAPI, which PyPI's wheels lack: they run
in neither lane but in a third, with ``make kerberos-clients``' ``.venv-krb``. That build starts
with the lanes, under ``nice -n 19`` (its output in ``krb-build.log`` of the lanes' folder); the
krb lane runs ``-m krb_clients`` as soon as the build has ended, beside the other two, on ports
``KRB_LANE_OFFSET`` lower, so it does not lengthen the run when it ends before the rest lane.
The rest's report streams to the terminal; the long and krb lanes' are printed when all have
ended. Exit status: 0 only when the build and every lane passed; the last line names each lane
that failed. Each lane must run tests (pytest's "no tests collected" fails it), unless ``-k``
narrows the selection, which may leave a lane none.

    python -m tests.lanes [pytest arguments...]
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

LONG_LANE_OFFSET = -8000
# the krb lane's clusters, KDCs and metrics: between the rest lane's (30092-32892 and the Spark
# master's 27077, none offset) and the long lane's (8000 lower), 1000 ports clear of either
KRB_LANE_OFFSET = -5000
NO_TESTS = 5  # pytest's exit status when no test was collected
KRB_MARKER = "krb_clients"
REPO = Path(__file__).resolve().parents[1]
KRB_PYTHON = REPO / ".venv-krb" / "bin" / "python"


def _pytest(python: str | Path, marker: str, args: list[str], basetemp: Path, env: dict[str, str],
            **kwargs: object) -> subprocess.Popen:
    cmd = [str(python), "-m", "pytest", "-q", "--durations=25", "-m", marker, f"--basetemp={basetemp}", *args, "tests"]
    return subprocess.Popen(cmd, env=env, cwd=REPO, start_new_session=True, **kwargs)  # type: ignore[call-overload]


def _build(log: IO[bytes]) -> subprocess.Popen:
    """``make kerberos-clients`` at the lowest CPU priority (a no-op when .venv-krb is up to date)."""
    return subprocess.Popen(["nice", "-n", "19", "make", "--no-print-directory", "kerberos-clients"], cwd=REPO,
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
    for proc in procs:
        proc.wait(60)


def _print_report(title: str, report: Path, last_lines: int | None = None) -> None:
    print(f"\n---- {title} ----", flush=True)
    lines = report.read_text(errors="replace").splitlines(keepends=True) if report.exists() else ["(no output)\n"]
    sys.stdout.write("".join(lines[-last_lines:] if last_lines else lines))


def _selects(args: list[str]) -> bool:
    """Whether ``args`` narrow the tests by name (``-k``): a lane may then rightly select none."""
    return any(arg == "-k" or (arg.startswith("-k") and not arg.startswith("--")) for arg in args)


def _failed(rc: int | None, selected: bool) -> bool:
    """A lane's exit status as a failure: pytest's 5 (no test collected) is one unless ``-k`` selected."""
    return rc not in (0, None) and not (rc == NO_TESTS and selected)


def main(args: list[str]) -> int:
    root = Path(tempfile.mkdtemp(prefix="mm2py-lanes-"))
    offset = int(os.environ.get("MM2PY_TEST_PORT_OFFSET", "0"))
    long_env = dict(os.environ, MM2PY_TEST_PORT_OFFSET=str(offset + LONG_LANE_OFFSET))
    krb_env = dict(os.environ, MM2PY_TEST_PORT_OFFSET=str(offset + KRB_LANE_OFFSET))
    long_report, krb_report, build_log = root / "long-lane.log", root / "krb-lane.log", root / "krb-build.log"
    started = time.monotonic()
    procs: list[subprocess.Popen] = []
    krb_rc: int | None = None
    krb_s: float | None = None
    with open(long_report, "wb") as long_out, open(build_log, "wb") as build_out, open(krb_report, "wb") as krb_out:
        try:
            build = _build(build_out)
            procs.append(build)
            long_lane = _pytest(sys.executable, f"long and not {KRB_MARKER}", args, root / "long", long_env,
                                stdout=long_out, stderr=subprocess.STDOUT)
            procs.append(long_lane)
            rest = _pytest(sys.executable, f"not long and not {KRB_MARKER}", args, root / "rest", dict(os.environ))
            procs.append(rest)
            build_rc = build.wait()  # the krb lane starts as soon as the build ends, beside the others
            build_s = time.monotonic() - started
            print(f"\n---- kerberos-clients build exit {build_rc} after {build_s:.0f} s (log {build_log})"
                  f"{'; the krb lane starts' if build_rc == 0 else ''} ----", flush=True)
            if build_rc == 0:
                krb_started = time.monotonic()
                krb_lane = _pytest(KRB_PYTHON, KRB_MARKER, args, root / "krb", krb_env,
                                   stdout=krb_out, stderr=subprocess.STDOUT)
                procs.append(krb_lane)
            rest_rc = rest.wait()
            if build_rc == 0:
                krb_rc = krb_lane.wait()
                krb_s = time.monotonic() - krb_started
            long_rc = long_lane.wait()
        except KeyboardInterrupt:
            _stop(procs)
            raise
    _print_report(f"long lane (tests marked long, ports {LONG_LANE_OFFSET} lower)", long_report)
    if build_rc != 0:
        _print_report(f"kerberos-clients build failed (exit {build_rc}): its last lines", build_log, 60)
    else:
        _print_report(f"krb lane (tests marked {KRB_MARKER}, {KRB_PYTHON.relative_to(REPO)}, ports "
                      f"{-KRB_LANE_OFFSET} lower; {krb_s:.0f} s)", krb_report)
    selected = _selects(args)
    lanes = (("rest lane", rest_rc), ("long lane", long_rc), ("kerberos-clients build", build_rc), ("krb lane", krb_rc))
    failed = [name for name, rc in lanes if name == "kerberos-clients build" and rc != 0 or _failed(rc, selected)]
    print(f"---- all lanes ended in {time.monotonic() - started:.0f} s: rest exit {rest_rc}, long lane exit {long_rc}, "
          f"kerberos-clients build exit {build_rc}, krb lane exit {'not run' if krb_rc is None else krb_rc} ----")
    if failed:
        print(f"---- FAILED: {', '.join(failed)} ----")
    return 0 if not failed else 1

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
