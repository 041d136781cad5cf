"""``make test``: the suite in lanes, pytest processes side by side, so that waits do not add up.

tests/lane_layout.py says which tests each lane runs: the tests not marked ``long`` in the rest
lane, which streams its report to the terminal; the tests marked ``long`` (broker restarts, a
three-minute outage, crash loops: minutes spent waiting on brokers, not on the CPU) in two long
lanes beside it. Both are shared out by module, a module no lane names running in
its marker's default lane. The lanes never meet: each has its own temporary directory, and its
clusters, registries, KDCs and metrics listen at its own offset from ``MM2PY_TEST_PORT_OFFSET``
(lane_layout's port band).

Tests marked ``krb_clients`` need confluent-kafka with GSSAPI, which PyPI's wheels lack: they run in
the krb lane, with ``make kerberos-clients``' ``.venv-krb``. That build starts with the lanes, under
``nice -n 19`` (its output in ``krb-build.log`` of the lanes' folder); the krb lane runs once the
build has ended and fewer than ``MAX_RUNNING`` lanes run: a fourth pytest process beside three
loaded two cores to a load average of 24, where Spark's Python runners, which must connect back to
their JVM within 10 s (hard-coded in PythonWorkerFactory), did not. The other lanes' reports
(``<lane>-lane.log``) are printed when all have ended, each with its seconds. Exit status: 0 only
when the build and every lane passed; the last line names each lane that failed. Each lane must run
tests (pytest's "no tests collected" fails it), unless ``-k`` narrows the selection, which may leave
a lane none.

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

from tests.lane_layout import LANES, Lane, selection

NO_TESTS = 5  # pytest's exit status when no test was collected
REPO = Path(__file__).resolve().parents[1]
KRB_PYTHON = REPO / ".venv-krb" / "bin" / "python"
BUILD = "kerberos-clients build"
# the lanes' waits (tests/kafkautil.TIMEOUT_SCALE): lanes side by side load two cores past what a
# lone test sees, a replicator's start took 84 s and its first query's Python runner a retry
TIMEOUT_SCALE = "2"
MAX_RUNNING = 3  # lanes at once (the krb lane waits for a free one)


def _pytest(lane: Lane, args: list[str], root: Path, offset: int, out: IO[bytes] | None) -> subprocess.Popen:
    python = KRB_PYTHON if lane.krb else Path(sys.executable)
    env = dict(os.environ, MM2PY_TEST_PORT_OFFSET=str(offset + lane.offset))
    env.setdefault("MM2PY_TEST_TIMEOUT_SCALE", TIMEOUT_SCALE)
    cmd = [str(python), "-m", "pytest", "-q", "--durations=25", "-m", lane.marker, f"--basetemp={root / lane.name}",
           *args, *selection(lane)]
    return subprocess.Popen(cmd, env=env, cwd=REPO, start_new_session=True, stdout=out,
                            stderr=subprocess.STDOUT if out else None)


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


def _ran(rc: int | None, seconds: float | None) -> str:
    return "not run" if rc is None else f"exit {rc} after {seconds or 0:.0f} s"


def _title(lane: Lane, rc: int | None, seconds: float | None) -> str:
    ran = _ran(rc, seconds)
    python = f", {KRB_PYTHON.relative_to(REPO)}" if lane.krb else ""
    return f"{lane.name} lane (-m '{lane.marker}'{python}, ports {-lane.offset} lower; {ran})"


def main(args: list[str]) -> int:
    root = Path(tempfile.mkdtemp(prefix="mm2py-lanes-"))
    offset = int(os.environ.get("MM2PY_TEST_PORT_OFFSET", "0"))
    logged = LANES[1:]  # the first lane's report streams to the terminal
    reports = {lane.name: root / f"{lane.name}-lane.log" for lane in logged}
    build_log = root / "krb-build.log"
    started = time.monotonic()
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    ended: dict[str, tuple[int, float]] = {}
    outs = {name: open(path, "wb") for name, path in reports.items()}  # noqa: SIM115 (closed below)
    build: subprocess.Popen | None = None
    try:
        with open(build_log, "wb") as build_out:
            build = _build(build_out)
            for lane in LANES:
                if not lane.krb:
                    running[lane.name] = (_pytest(lane, args, root, offset, outs.get(lane.name)), time.monotonic())
            build_rc: int | None = None
            waiting = [lane for lane in LANES if lane.krb]
            while running or build_rc is None or (waiting and build_rc == 0):
                if build_rc is None and (build_rc := build.poll()) is not None:
                    print(f"\n---- {BUILD} exit {build_rc} after {time.monotonic() - started:.0f} s (log {build_log})"
                          f"{'; the krb lane starts when a lane is free' if build_rc == 0 else ''} ----", flush=True)
                while build_rc == 0 and waiting and len(running) < MAX_RUNNING:
                    lane = waiting.pop(0)
                    running[lane.name] = (_pytest(lane, args, root, offset, outs[lane.name]), time.monotonic())
                for name, (proc, since) in list(running.items()):
                    if (rc := proc.poll()) is not None:
                        ended[name] = (rc, time.monotonic() - since)
                        del running[name]
                time.sleep(0.5)
    except KeyboardInterrupt:
        _stop([*([build] if build else []), *(proc for proc, _ in running.values())])
        raise
    finally:
        for out in outs.values():
            out.close()
    if build_rc != 0:
        _print_report(f"{BUILD} failed (exit {build_rc}): its last lines", build_log, 60)
    for lane in logged:
        rc, seconds = ended.get(lane.name, (None, None))
        _print_report(_title(lane, rc, seconds), reports[lane.name])
    selected = _selects(args)
    status = {BUILD: build_rc, **{lane.name: ended.get(lane.name, (None, 0.0))[0] for lane in LANES}}
    failed = [name for name, rc in status.items() if (name == BUILD and rc != 0) or _failed(rc, selected)]
    lanes = ", ".join(f"{lane.name} {_ran(*ended.get(lane.name, (None, None)))}" for lane in LANES)
    print(f"---- all lanes ended in {time.monotonic() - started:.0f} s: {BUILD} exit {build_rc}, {lanes} ----")
    if failed:
        print(f"---- FAILED: {', '.join(failed)} ----")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
