"""The driver JVM's class archive: written by one run at a time, used once its writer has exited."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mm2py import cds
from mm2py.engine import jvmcache
from mm2py.engine.jvmcache import DriverArchive


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(jvmcache, "cache_root", lambda: tmp_path)
    monkeypatch.setattr(jvmcache, "usable", lambda path: path.read_bytes() == b"archive")
    monkeypatch.delenv(cds.DISABLE_ENV, raising=False)
    return tmp_path


def exited_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_first_run_writes_others_start_without_until_the_writer_exited(cache):
    first = DriverArchive("-XX:TieredStopAtLevel=1", "/spark")
    option = first.option()
    assert option.startswith(f"-XX:ArchiveClassesAtExit={first.partial} ")
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        first.started(writer.pid)
        first.worked()  # its first micro-batch was copied
        first.partial.write_bytes(b"archive")  # what the JVM writes at its exit
        assert DriverArchive("-XX:TieredStopAtLevel=1", "/spark").option() == "", "one writer at a time"
        assert not first.final.exists()
    finally:
        writer.kill()
        writer.wait()
    after = DriverArchive("-XX:TieredStopAtLevel=1", "/spark").option()
    assert after.startswith(f"-XX:SharedArchiveFile={first.final} ")
    assert first.final.read_bytes() == b"archive" and not first.lock.exists()


def test_a_writer_that_left_no_archive_lets_the_next_run_write(cache):
    first = DriverArchive("", "/spark")
    first.option()
    first.started(exited_pid())  # killed before its exit could write anything
    second = DriverArchive("", "/spark")
    assert second.option().startswith("-XX:ArchiveClassesAtExit=")
    assert not second.final.exists()


def test_archives_are_apart_per_jvm_options_and_spark_home(cache):
    paths = {DriverArchive(opts, home).final for opts in ("", "-Xmx1g") for home in ("/a", "/b")}
    assert len(paths) == 4


def test_can_be_turned_off(cache, monkeypatch):
    monkeypatch.setenv(cds.DISABLE_ENV, "0")
    assert DriverArchive("", "/spark").option() == ""
    assert not os.listdir(cache)


def test_an_archive_no_jvm_starts_with_is_dropped_not_used(cache):
    first = DriverArchive("", "/spark")
    first.option()
    first.partial.write_bytes(b"trunc")  # the writer was killed while dumping
    first.started(exited_pid())
    second = DriverArchive("", "/spark")
    assert second.option().startswith("-XX:ArchiveClassesAtExit="), "written again"
    assert not second.final.exists()


def test_the_start_check_refuses_an_archive_cut_short(tmp_path):
    """With this machine's java: a JVM maps a whole archive, and would crash (SIGBUS) on a cut one."""
    java = cds.java_binary()
    whole = tmp_path / "whole.jsa"
    subprocess.run([java, f"-XX:ArchiveClassesAtExit={whole}", cds.QUIET, "-version"], check=True,
                   capture_output=True, timeout=120)
    cut = tmp_path / "cut.jsa"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    assert cds.usable(whole)
    assert not cds.usable(cut)
    assert not list(Path.cwd().glob("hs_err_pid*.log")), "the crash report went nowhere near the caller"


def test_the_archive_of_a_run_that_never_copied_is_dropped_and_written_again(cache):
    """A run that ended at start-up archived only the classes of a start-up: not kept."""
    first = DriverArchive("", "/spark")
    first.option()
    first.started(exited_pid())
    first.partial.write_bytes(b"archive")  # a whole archive, of a run that never copied
    second = DriverArchive("", "/spark")
    assert second.option().startswith("-XX:ArchiveClassesAtExit="), "the next run writes it"
    assert not second.final.exists() and not second.partial.exists()
    second.started(exited_pid())
    second.worked()
    second.partial.write_bytes(b"archive")
    third = DriverArchive("", "/spark")
    assert third.option().startswith(f"-XX:SharedArchiveFile={third.final} ")
