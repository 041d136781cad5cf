"""The Java client keys each librdkafka client of mm2py applies, by the name MM2 files use.

``mm2py.config.clients`` reviews a flow's settings against these lists (a key no client applies is
warned); ``mm2py.kafka.clientconf`` translates the keys listed here into librdkafka's spelling. The
lists live in config so that config never imports the kafka package.
"""

from __future__ import annotations

# Java keys that mean the same thing to librdkafka under the same name, by the clients that take them
# (mm2py.config.clients says which client each key reaches).
_COMMON = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.kerberos.service.name", "client.id",
    "socket.connection.setup.timeout.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms", "retry.backoff.ms",
    "retry.backoff.max.ms", "metadata.max.age.ms", "connections.max.idle.ms", "client.dns.lookup",
})
RDKAFKA_SAME = {
    None: _COMMON,
    "admin": _COMMON,
    "consumer": _COMMON | {
        "client.rack", "fetch.max.bytes", "max.partition.fetch.bytes", "fetch.min.bytes", "check.crcs",
        "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms", "group.instance.id",
    },
    "producer": _COMMON | {
        "acks", "linger.ms", "batch.size", "compression.type", "enable.idempotence",
        "max.in.flight.requests.per.connection", "retries", "delivery.timeout.ms", "request.timeout.ms",
        "transaction.timeout.ms",
    },
}
# Java keys librdkafka spells differently (values converted in mm2py.kafka.clientconf)
_RENAMED_COMMON = frozenset({"request.timeout.ms", "send.buffer.bytes", "receive.buffer.bytes"})
RDKAFKA_RENAMED = {
    None: _RENAMED_COMMON,
    "admin": _RENAMED_COMMON,
    "consumer": _RENAMED_COMMON | {"fetch.max.wait.ms"},
    "producer": _RENAMED_COMMON | {
        "max.request.size", "buffer.memory", "compression.gzip.level", "compression.lz4.level",
        "compression.zstd.level",
    },
}
# The Java keys each kind of librdkafka client of mm2py applies (besides ssl.* / sasl.jaas.config, which
# mm2py.kafka.clientconf translates)
RDKAFKA_CONSUMER = RDKAFKA_SAME["consumer"] | RDKAFKA_RENAMED["consumer"]
RDKAFKA_PRODUCER = RDKAFKA_SAME["producer"] | RDKAFKA_RENAMED["producer"]
RDKAFKA_ADMIN = RDKAFKA_SAME["admin"] | RDKAFKA_RENAMED["admin"]
