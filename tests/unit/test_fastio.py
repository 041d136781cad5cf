"""The data path's own produce encoding and frame reader against kafka-python's."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from mm2py.kafka import fastio

PRODUCE = ProduceRequest[12]


def test_chunked_produce_encodes_exactly_as_kafka_python():
    big = bytes(range(256)) * 40  # above the by-reference threshold
    batches = {("orders", 0): (b"h" * 61, memoryview(big)), ("orders", 3): (b"small",),
               ("payments", 1): (memoryview(big)[:100], b"tail")}
    ours = fastio.ChunkedProduce(batches, timeout_ms=30000)
    ours.with_header(correlation_id=7, client_id="mm2py-task")
    theirs = PRODUCE(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        PRODUCE.TopicProduceData(name="orders", partition_data=[
            PRODUCE.TopicProduceData.PartitionProduceData(index=0, records=b"h" * 61 + big),
            PRODUCE.TopicProduceData.PartitionProduceData(index=3, records=b"small")]),
        PRODUCE.TopicProduceData(name="payments", partition_data=[
            PRODUCE.TopicProduceData.PartitionProduceData(index=1, records=big[:100] + b"tail")])])
    theirs.with_header(correlation_id=7, client_id="mm2py-task")
    pieces = ours.pieces()
    assert b"".join(pieces) == bytes(theirs.encode(framed=True, header=True))
    assert any(p is big or (isinstance(p, memoryview) and p.obj is big) for p in pieces), "batch body not copied"
    assert ours.header.get_response_class() is ProduceResponse[12]


def test_frame_protocol_decodes_responses_split_anywhere():
    request = fastio.ChunkedProduce({("t", 0): (b"x",)}, timeout_ms=1000)
    parser = fastio.FrameProtocol.__new__(fastio.FrameProtocol)
    fastio.KafkaProtocol.__init__(parser, client_id="c")
    parser._start_frames()
    responses = []
    for cid in (1, 2):
        parser.send_request(request, correlation_id=cid)
        body = ProduceResponse[12](responses=[ProduceResponse[12].TopicProduceResponse(name="t", partition_responses=[
            ProduceResponse[12].TopicProduceResponse.PartitionProduceResponse(
                index=0, error_code=0, base_offset=41 + cid, log_append_time_ms=-1, log_start_offset=0,
                record_errors=[], error_message=None)])], throttle_time_ms=0)
        body.with_header(correlation_id=cid)
        responses.append(bytes(body.encode(framed=True, header=True)))
    wire = b"".join(responses)
    got = []
    i = 0
    for step in (1, 3, 2, 7, 1000):  # uneven reads, across frame and size boundaries
        while i < len(wire):
            space = parser.free_space()
            n = min(step, len(space), len(wire) - i)
            space[:n] = wire[i:i + n]
            parser.received(n)
            i += n
            got += parser.receive_bytes(b"")
            if step < 1000 and i > len(wire) // 2:
                break
    assert [(cid, r.responses[0].partition_responses[0].base_offset) for cid, r in got] == [(1, 42), (2, 43)]
    assert struct.unpack(">i", wire[:4])[0] == len(responses[0]) - 4


def test_fetch_response_parsed_in_place_as_kafka_python_decodes_it():
    from kafka.protocol.consumer import FetchResponse

    from mm2py.kafka.fetch_response import parse_fetch

    resp_cls = FetchResponse[12]
    topic_cls = resp_cls.FetchableTopicResponse
    part_cls = topic_cls.PartitionData
    records = bytes(range(200)) * 30

    def part(index: int, data: bytes | None, aborted: list | None) -> object:
        return part_cls(partition_index=index, error_code=0 if data else 1, high_watermark=100 + index,
                        last_stable_offset=90 + index, log_start_offset=index, aborted_transactions=aborted,
                        preferred_read_replica=-1, records=data)

    aborted = [part_cls.AbortedTransaction(producer_id=7, first_offset=33)]
    resp = resp_cls(throttle_time_ms=0, error_code=0, session_id=77, responses=[
        topic_cls(topic="orders", partitions=[part(0, records, aborted), part(2, None, None)]),
        topic_cls(topic="pay", partitions=[part(1, b"xyz", [])])])
    resp.with_header(correlation_id=12)
    frame = memoryview(bytes(resp.encode(framed=True, header=True)))[4:]
    cid, error, session_id, parts = parse_fetch(frame)
    assert (cid, error, session_id) == (12, 0, 77)
    assert sorted(parts) == [("orders", 0), ("orders", 2), ("pay", 1)]
    first = parts[("orders", 0)]
    assert (first.error_code, first.high_watermark, first.last_stable_offset, first.log_start_offset) == (0, 100, 90, 0)
    assert first.aborted == ((7, 33),)
    assert isinstance(first.records, memoryview) and first.records.obj is frame.obj, "records not copied"
    assert bytes(first.records) == records
    assert parts[("orders", 2)].records == b"" and parts[("orders", 2)].error_code == 1
    assert bytes(parts[("pay", 1)].records) == b"xyz"


def test_broker_error_codes_map_to_our_errors():
    from mm2py.errors import AuthorizationError, RecordTooLargeError
    from mm2py.kafka.wire import to_kafka_error

    assert isinstance(to_kafka_error(10, cluster="B", topic="t", partition=1), RecordTooLargeError)
    assert isinstance(to_kafka_error(18, cluster="B"), RecordTooLargeError)
    assert isinstance(to_kafka_error(29, cluster="A", topic="t"), AuthorizationError)
    not_leader = to_kafka_error(6, cluster="A", topic="t", partition=2)
    assert not_leader.retriable and "[cluster=A" in str(not_leader)


def test_fetch_response_keeps_the_preferred_read_replica():
    from kafka.protocol.consumer import FetchResponse

    from mm2py.kafka.fetch_response import parse_fetch
    from mm2py.kafka.wire import RawClient

    resp_cls = FetchResponse[12]
    topic_cls = resp_cls.FetchableTopicResponse
    part = topic_cls.PartitionData(partition_index=0, error_code=0, high_watermark=9, last_stable_offset=9,
                                   log_start_offset=0, aborted_transactions=None, preferred_read_replica=3,
                                   records=None)
    resp = resp_cls(throttle_time_ms=0, error_code=0, session_id=0,
                    responses=[topic_cls(topic="orders", partitions=[part])])
    resp.with_header(correlation_id=1)
    frame = memoryview(bytes(resp.encode(framed=True, header=True)))[4:]
    assert parse_fetch(frame)[3][("orders", 0)].preferred_read_replica == 3
    unconnected = RawClient.__new__(RawClient)  # a v12 answer needs no topic ids
    assert unconnected.fetched(resp)[("orders", 0)].preferred_read_replica == 3, "kafka-python's decoding path too"


def test_a_v13_answer_names_topics_by_id_and_the_client_names_them_back():
    import uuid

    from kafka.protocol.consumer import FetchResponse

    from mm2py.errors import KafkaError
    from mm2py.kafka.fastio import RawFetch
    from mm2py.kafka.fetch_response import parse_fetch
    from mm2py.kafka.wire import RawClient, TopicIds

    orders, other = uuid.uuid4(), uuid.uuid4()
    resp_cls = FetchResponse[13]
    topic_cls = resp_cls.FetchableTopicResponse
    part = topic_cls.PartitionData(partition_index=2, error_code=0, high_watermark=9, last_stable_offset=9,
                                   log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
                                   records=None)
    resp = resp_cls(throttle_time_ms=0, error_code=0, session_id=77,
                    responses=[topic_cls(topic_id=orders, partitions=[part])])
    resp.with_header(correlation_id=5)
    frame = memoryview(bytes(resp.encode(framed=True, header=True)))[4:]
    cid, error, session_id, parts = parse_fetch(frame, 13)
    assert (cid, error, session_id, list(parts)) == (5, 0, 77, [(orders, 2)])
    client = RawClient.__new__(RawClient)
    client.alias, client._topic_ids = "A", TopicIds()
    client._topic_ids.learn("orders", orders)
    assert list(client.fetched(RawFetch(0, parts, 77))) == [("orders", 2)]
    assert list(client.fetched(resp)) == [("orders", 2)], "kafka-python's decoding path too"
    with pytest.raises(KafkaError, match="topic id"):
        client.fetched(RawFetch(0, {(other, 0): parts[(orders, 2)]}))
