"""``make test``: the suite in two lanes at once, so that the scenarios that mostly wait do not add up.

Tests marked ``long`` (broker restarts, a three-minute outage, crash loops: minutes spent waiting
on brokers, not on the CPU) run in a second pytest process beside the rest. The lanes never
meet: the long lane's clusters, registries and metrics listen ``LONG_LANE_OFFSET`` ports lower
(``MM2PY_TEST_PORT_OFFSET``) and each lane has its own temporary directory. The rest's report
streams to the terminal; the long lane's is printed when both have ended. Exit status: 0 only
when both lanes passed.

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

LONG_LANE_OFFSET = -8000


def _pytest(marker: str, args: list[str], basetemp: Path, env: dict[str, str], **kwargs: object) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "pytest", "-q", "--durations=25", "-m", marker, f"--basetemp={basetemp}",
           *args, "tests"]
    return subprocess.Popen(cmd, env=env, start_new_session=True, **kwargs)  # type: ignore[call-overload]


def main(args: list[str]) -> int:
    root = Path(tempfile.mkdtemp(prefix="mm2py-lanes-"))
    offset = int(os.environ.get("MM2PY_TEST_PORT_OFFSET", "0"))
    long_env = dict(os.environ, MM2PY_TEST_PORT_OFFSET=str(offset + LONG_LANE_OFFSET))
    report = root / "long-lane.log"
    started = time.monotonic()
    with open(report, "wb") as out:
        long_lane = _pytest("long", args, root / "long", long_env, stdout=out, stderr=subprocess.STDOUT)
        rest = _pytest("not long", args, root / "rest", dict(os.environ))
        try:
            rest_rc = rest.wait()
            long_rc = long_lane.wait()
        except KeyboardInterrupt:
            for proc in (rest, long_lane):
                os.killpg(proc.pid, signal.SIGINT)
            for proc in (rest, long_lane):
                proc.wait(60)
            raise
    print(f"\n---- long lane (tests marked long, ports {LONG_LANE_OFFSET} lower) ----", flush=True)
    sys.stdout.write(report.read_text(errors="replace"))
    print(f"---- both lanes ended in {time.monotonic() - started:.0f} s: rest exit {rest_rc}, long lane exit "
          f"{long_rc} ----")
    # pytest's 5 (no test collected) is a failure here: each lane has tests
    return 0 if rest_rc == 0 and long_rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
