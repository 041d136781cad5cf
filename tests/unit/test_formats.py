"""MM2 internal record formats against byte strings written out from the Kafka protocol spec."""

from __future__ import annotations

import pytest

from mm2py.errors import FormatError
from mm2py.formats import Checkpoint, Heartbeat, OffsetSync, SourceOffset


def test_heartbeat_bytes():
    hb = Heartbeat("A", "B", 1_700_000_000_123)
    assert hb.key_bytes() == b"\x00\x01A\x00\x01B"
    assert hb.value_bytes() == b"\x00\x00" + (1_700_000_000_123).to_bytes(8, "big")
    assert Heartbeat.from_record(hb.key_bytes(), hb.value_bytes()) == hb


def test_checkpoint_bytes():
    cp = Checkpoint("grp", "A.orders", 3, 100, 42, "meta")
    assert cp.key_bytes() == b"\x00\x03grp\x00\x08A.orders\x00\x00\x00\x03"
    assert cp.value_bytes() == (b"\x00\x00" + (100).to_bytes(8, "big") + (42).to_bytes(8, "big")
                                + b"\x00\x04meta")
    assert Checkpoint.from_record(cp.key_bytes(), cp.value_bytes()) == cp


def test_offset_sync_bytes_have_no_version():
    sync = OffsetSync("orders", 7, 2**40, 5)
    assert sync.key_bytes() == b"\x00\x06orders\x00\x00\x00\x07"
    assert sync.value_bytes() == (2**40).to_bytes(8, "big") + (5).to_bytes(8, "big")
    assert OffsetSync.from_record(sync.key_bytes(), sync.value_bytes()) == sync


def test_utf8_strings_count_bytes_not_characters():
    assert Heartbeat("é", "B", 0).key_bytes() == b"\x00\x02\xc3\xa9\x00\x01B"


def test_source_offset_matches_what_mm2s_worker_writes():
    pos = SourceOffset("A", "shim1", 0, 99)
    assert pos.key_bytes() == b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"shim1"}]'
    assert pos.value_bytes() == b'{"offset":99}'
    assert SourceOffset.from_record(b'["MirrorSourceConnector", {"topic": "shim1", "partition": 0, '
                                    b'"cluster": "A"}]', b'{"offset": 99}') == pos
    assert SourceOffset.from_record(pos.key_bytes(), None).offset is None


def test_other_connectors_state_is_not_a_position():
    key = b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]'
    assert SourceOffset.from_record(key, b'{"offset":1}') is None


@pytest.mark.parametrize("decode,key,value", [
    (Heartbeat.from_record, b"\x00\x01A\x00\x01B", b"\x00\x01" + b"\x00" * 8),  # unknown version
    (Heartbeat.from_record, b"\x00\x05A", b""),                                   # truncated key
    (Checkpoint.from_record, b"\x00\x01g\x00\x01t\x00\x00\x00\x01", b"\x00\x00\x00"),
    (OffsetSync.from_record, b"\x00\x01t\x00\x00\x00\x01", b"\x00" * 12),
])
def test_bad_bytes_raise_format_error(decode, key, value):  # noqa: ANN001
    with pytest.raises(FormatError):
        decode(key, value)


def test_source_offset_garbage_is_a_format_error():
    with pytest.raises(FormatError):
        SourceOffset.from_record(b"not json", b"{}")
