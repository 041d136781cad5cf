"""MM2 internal record formats against byte strings written out by hand from the Kafka protocol
spec (and, for the JSON ones, from what Kafka Connect 4.3.0's JsonConverter emits)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mm2py.errors import FormatError, Mm2pyError
from mm2py.formats import Checkpoint, Heartbeat, OffsetSync, SourceOffset

TS = 1_700_000_000_123  # 0x0000018BCFE5687B


def test_heartbeat_bytes() -> None:
    hb = Heartbeat("A", "B", TS)
    assert hb.key_bytes() == b"\x00\x01A\x00\x01B"
    assert hb.value_bytes() == b"\x00\x00" + b"\x00\x00\x01\x8b\xcf\xe5\x68\x7b"
    assert Heartbeat.from_record(hb.key_bytes(), hb.value_bytes()) == hb


def test_checkpoint_bytes() -> None:
    cp = Checkpoint("grp", "A.orders", 3, 100, 42, "meta")
    assert cp.key_bytes() == b"\x00\x03grp\x00\x08A.orders\x00\x00\x00\x03"
    assert cp.value_bytes() == (b"\x00\x00"                            # version 0
                                b"\x00\x00\x00\x00\x00\x00\x00\x64"    # upstreamOffset 100
                                b"\x00\x00\x00\x00\x00\x00\x00\x2a"    # offset 42
                                b"\x00\x04meta")
    assert Checkpoint.from_record(cp.key_bytes(), cp.value_bytes()) == cp
    assert cp.topic_partition == ("A.orders", 3)


def test_checkpoint_with_empty_metadata() -> None:
    cp = Checkpoint("g", "t", 0, 0, 0)
    assert cp.value_bytes() == b"\x00\x00" + b"\x00" * 16 + b"\x00\x00"
    assert Checkpoint.from_record(cp.key_bytes(), cp.value_bytes()) == cp


def test_offset_sync_bytes_have_no_version() -> None:
    sync = OffsetSync("orders", 7, 2**40, 5)
    assert sync.key_bytes() == b"\x00\x06orders\x00\x00\x00\x07"
    assert sync.value_bytes() == b"\x00\x00\x01\x00\x00\x00\x00\x00" b"\x00\x00\x00\x00\x00\x00\x00\x05"
    assert OffsetSync.from_record(sync.key_bytes(), sync.value_bytes()) == sync


def test_integers_are_signed_big_endian() -> None:
    sync = OffsetSync("t", -1, -1, 2**63 - 1)
    assert sync.key_bytes() == b"\x00\x01t\xff\xff\xff\xff"
    assert sync.value_bytes() == b"\xff" * 8 + b"\x7f" + b"\xff" * 7
    assert OffsetSync.from_record(sync.key_bytes(), sync.value_bytes()) == sync


def test_utf8_strings_count_bytes_not_characters() -> None:
    assert Heartbeat("é", "B", 0).key_bytes() == b"\x00\x02\xc3\xa9\x00\x01B"


def test_string_length_limit() -> None:
    assert len(OffsetSync("t" * 32767, 0, 0, 0).key_bytes()) == 2 + 32767 + 4
    with pytest.raises(FormatError, match="32767"):
        OffsetSync("t" * 32768, 0, 0, 0).key_bytes()


def test_out_of_range_integers_are_format_errors() -> None:
    with pytest.raises(FormatError, match="partition"):
        OffsetSync("t", 2**31, 0, 0).key_bytes()
    with pytest.raises(FormatError, match="timestamp"):
        Heartbeat("A", "B", 2**63).value_bytes()


def test_trailing_bytes_are_ignored_as_javas_schema_read_does() -> None:
    hb = Heartbeat("A", "B", TS)
    assert Heartbeat.from_record(hb.key_bytes() + b"\x00", hb.value_bytes() + b"\x01\x02") == hb


@pytest.mark.parametrize("decode,key,value,why", [
    (Heartbeat.from_record, b"\x00\x01A\x00\x01B", b"\x00\x01" + b"\x00" * 8, "unknown version 1"),
    (Heartbeat.from_record, b"\x00\x05A", b"\x00\x00" + b"\x00" * 8, "truncated at sourceClusterAlias"),
    (Heartbeat.from_record, b"\x00\x01A\x00\x01B", b"\x00\x00\x00", "truncated at timestamp"),
    (Checkpoint.from_record, b"\x00\x01g\x00\x01t\x00\x00\x00\x01", b"\x00\x00\x00", "truncated at upstreamOffset"),
    (Checkpoint.from_record, b"\x00\x01g\x00\x01t\x00\x00", b"\x00\x00" + b"\x00" * 18, "truncated at partition"),
    (Checkpoint.from_record, b"\x00\x01g\x00\x01t\x00\x00\x00\x01", b"\x00\x02" + b"\x00" * 18, "unknown version"),
    (OffsetSync.from_record, b"\x00\x01t\x00\x00\x00\x01", b"\x00" * 12, "truncated at offset"),
    (OffsetSync.from_record, b"\xff\xff\x00\x00\x00\x01", b"\x00" * 16, "negative length"),
    (OffsetSync.from_record, b"\x00\x01\xff\x00\x00\x00\x01", b"\x00" * 16, "not UTF-8"),
    (OffsetSync.from_record, None, b"\x00" * 16, "null key"),
])
def test_bad_bytes_raise_format_error(
    decode: Callable[[bytes, bytes], object], key: bytes, value: bytes, why: str
) -> None:
    with pytest.raises(FormatError, match=why) as err:
        decode(key, value)
    assert isinstance(err.value, Mm2pyError)


# -- Connect source offsets -------------------------------------------------------------------

def test_source_offset_key_is_what_mm2s_worker_writes() -> None:
    # Jackson's compact JSON of [name, HashMap]: the map iterates cluster, partition, topic
    pos = SourceOffset("A", "t", 0, 99)
    assert pos.key_bytes() == b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]'
    assert pos.value_bytes() == b'{"offset":99}'
    assert SourceOffset("primary", "test-topic-1", 7, -1).key_bytes() == (
        b'["MirrorSourceConnector",{"cluster":"primary","partition":7,"topic":"test-topic-1"}]')
    assert SourceOffset("A", "t", 0, 2**63 - 1).value_bytes() == b'{"offset":9223372036854775807}'


def test_source_offset_strings_escape_as_jackson_does() -> None:
    # bytes produced by Kafka 4.3.0's JsonConverter for the same values
    odd = SourceOffset("al\u00e9\u4e2d\U0001f600", "t\n\t\r\b\f\x01\x1f\x7f", 1, 0, 'My "conn"\\/x')
    assert odd.key_bytes() == (b'["My \\"conn\\"\\\\/x",{"cluster":"al\xc3\xa9\xe4\xb8\xad\\uD83D\\uDE00",'
                               b'"partition":1,"topic":"t\\n\\t\\r\\b\\f\\u0001\\u001F\x7f"}]')
    assert SourceOffset.from_record(odd.key_bytes(), odd.value_bytes(), 'My "conn"\\/x') == odd


def test_source_offset_reads_any_spelling() -> None:
    pos = SourceOffset("A", "shim1", 0, 99)
    spaced = b'[ "MirrorSourceConnector", {"topic": "shim1", "partition": 0, "cluster": "A"} ]'
    assert SourceOffset.from_record(spaced, b'{ "offset" : 99 }') == pos
    assert SourceOffset.from_record(pos.key_bytes(), pos.value_bytes()) == pos


def test_source_offset_tombstone() -> None:
    gone = SourceOffset.from_record(b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]', None)
    assert gone == SourceOffset("A", "t", 0, None)
    assert gone.value_bytes() is None


def test_connector_name() -> None:
    renamed = SourceOffset("A", "t", 0, 5, connector_name="a-to-b-source")
    assert renamed.key_bytes().startswith(b'["a-to-b-source",{')
    assert SourceOffset.from_record(renamed.key_bytes(), renamed.value_bytes()) is None
    assert SourceOffset.from_record(renamed.key_bytes(), renamed.value_bytes(), "a-to-b-source") == renamed


def test_other_connectors_state_is_not_a_position() -> None:
    key = b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]'
    assert SourceOffset.from_record(key, b'{"offset":1}') is None


@pytest.mark.parametrize("key,value", [
    (b"not json", b"{}"),
    (b'{"cluster":"A"}', b'{"offset":1}'),
    (b'["MirrorSourceConnector",{"cluster":"A","topic":"t"}]', b'{"offset":1}'),
    (b'["MirrorSourceConnector",{"cluster":"A","partition":"0","topic":"t"}]', b'{"offset":1}'),
    (b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]', b'{"offset":"1"}'),
    (b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]', b"[1]"),
])
def test_source_offset_garbage_is_a_format_error(key: bytes, value: bytes) -> None:
    with pytest.raises(FormatError):
        SourceOffset.from_record(key, value)
