"""The dev brokers' class archive: one writer dumps it from a running JVM; every JVM after maps it."""

import subprocess
import sys
import time

import pytest

from mm2py import cds
from mm2py.dev.brokercds import BrokerArchive, broker_java


@pytest.fixture
def libs(tmp_path, monkeypatch):
    monkeypatch.delenv(cds.DISABLE_ENV, raising=False)
    (tmp_path / "libs").mkdir()
    return tmp_path / "libs"


def exited_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_first_start_records_and_dumps_then_every_jvm_maps_the_archive(libs, tmp_path):
    java = broker_java()
    writer = BrokerArchive(libs, java)
    assert writer.options() == ("-XX:+RecordDynamicDumpInfo",)
    assert BrokerArchive(libs, java).options() == (), "one writer at a time; the others start without"
    (tmp_path / "Wait.java").write_text(
        "public class Wait { public static void main(String[] a) throws Exception { Thread.sleep(120000); } }")
    jvm = subprocess.Popen([java, "-XX:+RecordDynamicDumpInfo", "Wait.java"], cwd=tmp_path)
    jcmd = str(writer._jcmd())
    try:
        for _ in range(120):  # until the JVM answers, as a broker does before its dump
            if subprocess.run([jcmd, str(jvm.pid), "VM.version"], capture_output=True).returncode == 0:
                break
            time.sleep(0.25)
        assert writer.dump(jvm.pid)
    finally:
        jvm.kill()
        jvm.wait()
    assert writer.final.exists() and not writer.lock.exists() and not list(writer.final.parent.glob("*.partial"))
    after = BrokerArchive(libs, java)
    assert after.options() == after.mapping() == (f"-XX:SharedArchiveFile={after.final}", cds.QUIET)
    assert subprocess.run([java, *after.mapping(), "-version"], capture_output=True).returncode == 0


def test_a_writer_that_died_leaves_the_writing_to_the_next(libs):
    first = BrokerArchive(libs, broker_java())
    first.lock.parent.mkdir(parents=True)
    first.lock.write_text(str(exited_pid()))  # its process was killed before the dump
    assert BrokerArchive(libs, broker_java()).options() == ("-XX:+RecordDynamicDumpInfo",)


def test_a_broker_that_did_not_start_releases_the_lock(libs):
    first = BrokerArchive(libs, broker_java())
    assert first.options()
    first.release()
    assert not first.lock.exists()
    assert BrokerArchive(libs, broker_java()).options() == ("-XX:+RecordDynamicDumpInfo",)


def test_a_dump_that_fails_publishes_nothing(libs):
    writer = BrokerArchive(libs, broker_java())
    assert writer.options()
    assert not writer.dump(exited_pid())
    assert not writer.final.exists() and not writer.lock.exists()


def test_can_be_turned_off(libs, monkeypatch):
    monkeypatch.setenv(cds.DISABLE_ENV, "0")
    assert BrokerArchive(libs, broker_java()).options() == ()
    assert not (libs.parent / "jvm").exists()
