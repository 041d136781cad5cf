import threading

import pytest

from mm2py.engine.warmup import WorkerWarmup


def test_the_warm_up_runs_beside_the_caller_and_finish_waits_for_it():
    release, ran = threading.Event(), threading.Event()

    def warm() -> None:
        release.wait(5)
        ran.set()

    warmup = WorkerWarmup(warm).start()
    assert not ran.is_set()  # start() returned while the warm-up is still running
    release.set()
    warmup.finish(threading.Event())
    assert ran.is_set()


def test_finish_raises_the_warm_up_error():
    def warm() -> None:
        raise RuntimeError("Python worker failed to start")

    warmup = WorkerWarmup(warm).start()
    with pytest.raises(RuntimeError, match="Python worker failed to start"):
        warmup.finish(threading.Event())


def test_finish_returns_at_stop_without_raising():
    release = threading.Event()

    def warm() -> None:
        release.wait(5)
        raise RuntimeError("the JVM went away under a signal")

    stop = threading.Event()
    stop.set()
    warmup = WorkerWarmup(warm).start()
    warmup.finish(stop)  # returns at once: a signal stops the run, the warm-up's fate does not matter
    release.set()
