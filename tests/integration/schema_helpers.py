"""Shared pieces of the schema mirroring tests: two real Apicurio registries, Avro serde helpers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, topic_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from mm2py.dev import registry as devregistry
from tests.conftest import PORT_OFFSET

# Apicurio instances listen on port (HTTP) and port+1 (management); 22081/22181 with offset -10000
REGISTRY_PORTS = {"a": 32081 + PORT_OFFSET, "b": 32181 + PORT_OFFSET}

KEY = '{"type":"record","name":"OrderKey","namespace":"shop","fields":[{"name":"id","type":"long"}]}'
V1 = ('{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},'
      '{"name":"amount","type":"double"}]}')
V2 = ('{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},'
      '{"name":"amount","type":"double"},{"name":"note","type":"string","default":""}]}')
DECOY = '{"type":"record","name":"Decoy%d","fields":[{"name":"x","type":"string"},{"name":"y","type":"long"}]}'


@contextlib.contextmanager
def two_registries(workdir: Path) -> Iterator[tuple[devregistry.DevRegistry, devregistry.DevRegistry]]:
    """Registries ``reg-a`` and ``reg-b``, started side by side, stopped at the end.

    ``reg-b`` holds three unrelated schemas first, so the same schema gets other ids on B than on A
    (and A's low ids name different schemas on B: a byte-for-byte copy decodes wrongly there).
    Each call starts empty registries; ``client`` forgets clients of registries stopped before.
    """
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(devregistry.start_registry, f"reg-{k}", port, workdir=workdir)
                   for k, port in REGISTRY_PORTS.items()]
        started = [f.result() for f in futures]
    for r in started:  # a client cached for an earlier registry on these ports would answer from its cache
        _clients.pop(r.url, None)
    try:
        for i in range(3):
            client(started[1].url).register_schema("decoys-value", Schema(DECOY % i, "AVRO"))
        yield started[0], started[1]
    finally:
        for r in started:
            devregistry.stop_registry(r.name, workdir)


_clients: dict[str, SchemaRegistryClient] = {}


def client(url: str) -> SchemaRegistryClient:
    """One client per registry, with a timeout: a test fails rather than waits on a stuck request."""
    if url not in _clients:
        _clients[url] = SchemaRegistryClient({"url": url, "timeout": 20})
    return _clients[url]


def serializer(url: str, schema: str) -> AvroSerializer:
    # TopicNameStrategy named: confluent-kafka 2.16's default first asks an associations API that
    # Apicurio answers 404, and a request after that 404 on the same connection once hung for minutes
    return AvroSerializer(client(url), schema, conf={"subject.name.strategy": topic_subject_name_strategy})


def encode(ser: AvroSerializer, topic: str, value: dict, field: str = MessageField.VALUE) -> bytes:
    return ser(value, SerializationContext(topic, field))


def decoder(url: str) -> AvroDeserializer:
    return AvroDeserializer(client(url))


def decode(des: AvroDeserializer, topic: str, data: bytes | None, field: str = MessageField.VALUE) -> object:
    return None if data is None else des(data, SerializationContext(topic, field))
