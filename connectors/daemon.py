"""Spark's Python worker daemon, deaf to SIGINT and SIGTERM (``spark.python.daemon.module``).

systemd's default ``KillMode=control-group`` sends SIGTERM to every process of the unit at once:
PySpark's daemon would shut down and its workers die mid-task, so what a copy task had copied
would never be committed. Here the daemon and the workers it forks ignore both signals, as the
driver JVM does (mm2py.engine.sparkhome); mm2py's driver stops them in order after the running
micro-batches committed. They still end as PySpark ends them: the daemon when the JVM closes its
stdin (it then sends its workers SIGHUP), a worker whose task is killed by SIGKILL.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

DEAF_TO = (signal.SIGINT, signal.SIGTERM)


def deaf_signal(real: Callable[..., Any]) -> Callable[..., Any]:
    """``signal.signal`` that installs SIG_IGN for the signals in ``DEAF_TO``, whatever is asked."""

    def install(signum: int, handler: Any) -> Any:
        return real(signum, signal.SIG_IGN if signum in DEAF_TO else handler)

    return install


def main() -> None:
    for signum in DEAF_TO:
        signal.signal(signum, signal.SIG_IGN)
    # PySpark's daemon and its forked workers install their own handlers for these: ignore instead
    signal.signal = deaf_signal(signal.signal)
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
