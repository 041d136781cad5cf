"""The floor of a catch-up workload: the same backlog read by a plain consumer, no replicator.

``python -m bench.floor BOOTSTRAP TOPIC[,TOPIC...]`` reads every partition of the topics from
its first offset to the end offset it had at start with one librdkafka consumer (its fetch
threads as a Java consumer would tune them: 1 MiB per partition, 64 MiB per fetch), counts the
records and prints one JSON line: ``records``, ``first_s`` and ``last_s`` (seconds from the
process's start to the first and the last record read). Nothing is written anywhere.

A replicator must at least read what it copies, on the same brokers and cores, so no tool can
copy the backlog faster than this reads it: where the floor's rate misses a target, the bench
reports both (bench.run, tool ``floor``).
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Consumer, TopicPartition


def end_offsets(consumer: Consumer, topics: list[str]) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, high) watermark of every partition of ``topics``, read_committed's high being the LSO."""
    out = {}
    md = consumer.list_topics(timeout=30)
    for topic in topics:
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None:
            raise SystemExit(f"bench.floor: topic {topic} not found on the source ({meta and meta.error})")
        for p in meta.partitions:
            out[(topic, p)] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
    return out


def read_backlog(bootstrap: str, topics: list[str], timeout_s: float = 1800) -> dict[str, float]:
    """Read every record below each partition's end offset now; the count and the read window."""
    t0 = time.monotonic()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-floor", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "max.partition.fetch.bytes": 1 << 20,
                         "fetch.max.bytes": 64 << 20, "queued.max.messages.kbytes": 256 << 10, "log_level": 0})
    try:
        ends = end_offsets(consumer, topics)
        consumer.assign([TopicPartition(t, p, low) for (t, p), (low, high) in ends.items() if high > low])
        # a partition is read once its last record below the end came, or its position passed the end
        open_ends = {tp: high for tp, (low, high) in ends.items() if high > low}
        expected = sum(high - low for low, high in ends.values())
        count, first, last = 0, None, None
        deadline = t0 + timeout_s
        while open_ends:
            if time.monotonic() > deadline:
                raise SystemExit(f"bench.floor: read {count} of {expected} records in {timeout_s:.0f} s; "
                                 f"{len(open_ends)} partitions not at their end")
            messages = consumer.consume(10_000, 0.5)
            for msg in messages:
                if msg.error():
                    raise SystemExit(f"bench.floor: {msg.topic()}:{msg.partition()}: {msg.error()}")
                tp = (msg.topic(), msg.partition())
                high = ends[tp][1]
                if msg.offset() < high:
                    count += 1
                    if msg.offset() + 1 >= high:
                        open_ends.pop(tp, None)
            if messages:
                last = time.monotonic()
                first = first or last
            else:  # a partition whose last offsets are transaction markers: its position passed them
                for part in consumer.position([TopicPartition(t, p) for t, p in open_ends]):
                    if part.offset >= open_ends[(part.topic, part.partition)]:
                        del open_ends[(part.topic, part.partition)]
        return {"records": count, "expected": expected, "first_s": round((first or t0) - t0, 3),
                "last_s": round((last or t0) - t0, 3)}
    finally:
        consumer.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        raise SystemExit("usage: python -m bench.floor BOOTSTRAP TOPIC[,TOPIC...]")
    print(json.dumps(read_backlog(argv[0], argv[1].split(","))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
