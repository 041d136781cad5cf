"""Translate Kafka Java-client settings (as MM2 files spell them) for our client libraries.

MM2 files carry Java client keys (``security.protocol``, ``sasl.jaas.config``,
``ssl.truststore.location`` ...). confluent-kafka (librdkafka) and kafka-python each want
their own spelling; this module is the only place that knows both.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from mm2py.errors import ConfigError, ConfigProblem

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')

# Java keys that mean the same thing to librdkafka under the same name.
_RDKAFKA_SAME = {
    "security.protocol",
    "sasl.mechanism",
    "client.id",
    "socket.connection.setup.timeout.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "retry.backoff.ms",
}
# Java keys that have no meaning for our clients and are dropped on purpose.
_JAVA_ONLY = {
    "key.serializer",
    "value.serializer",
    "key.deserializer",
    "value.deserializer",
    "ssl.endpoint.identification.algorithm",
}


def _jaas_credentials(jaas: str, alias: str) -> tuple[str, str]:
    options = dict(_JAAS_OPTION.findall(jaas))
    if "username" not in options or "password" not in options:
        raise ConfigError(
            ConfigProblem(f"{alias}.sasl.jaas.config", "needs username=\"...\" and password=\"...\"")
        )
    return options["username"], options["password"]


def _pem_location(props: Mapping[str, str], kind: str, alias: str) -> str | None:
    location = props.get(f"ssl.{kind}.location")
    if location is None:
        return None
    store_type = props.get(f"ssl.{kind}.type", "PEM").upper()
    if store_type != "PEM":
        raise ConfigError(
            ConfigProblem(
                f"{alias}.ssl.{kind}.type",
                f"{store_type} stores are Java-only; convert to PEM and set ssl.{kind}.type=PEM",
            )
        )
    return location


RDKAFKA_LOGGER = logging.getLogger("rdkafka")
# Broker connection retries are noise; failures reach the operator as mm2py errors.
# ``--log-level DEBUG`` lowers this (mm2py.logs).
RDKAFKA_LOGGER.setLevel(logging.CRITICAL)


def rdkafka_config(bootstrap: str, props: Mapping[str, str], alias: str) -> dict[str, object]:
    """Settings for confluent-kafka clients (admin, producer, consumer)."""
    # librdkafka logs through Python logging, so our log setup decides what is shown;
    # connection failures surface as mm2py errors naming the cluster instead
    conf: dict[str, object] = {"bootstrap.servers": bootstrap, "logger": RDKAFKA_LOGGER}
    for key, value in props.items():
        if key in _RDKAFKA_SAME:
            conf[key] = value
    if "sasl.jaas.config" in props:
        user, password = _jaas_credentials(props["sasl.jaas.config"], alias)
        conf["sasl.username"] = user
        conf["sasl.password"] = password
    if ca := _pem_location(props, "truststore", alias):
        conf["ssl.ca.location"] = ca
    if cert := _pem_location(props, "keystore", alias):
        conf["ssl.certificate.location"] = cert
        conf["ssl.key.location"] = props.get("ssl.key.location", cert)
    if "ssl.key.password" in props:
        conf["ssl.key.password"] = props["ssl.key.password"]
    if props.get("ssl.endpoint.identification.algorithm", "https") == "":
        conf["ssl.endpoint.identification.algorithm"] = "none"
    return conf


def kafka_python_config(bootstrap: str, props: Mapping[str, str], alias: str) -> dict[str, object]:
    """Settings for kafka-python's network client (the raw fetch/produce path)."""
    conf: dict[str, object] = {"bootstrap_servers": bootstrap.split(",")}
    if "security.protocol" in props:
        conf["security_protocol"] = props["security.protocol"].upper()
    if "sasl.mechanism" in props:
        conf["sasl_mechanism"] = props["sasl.mechanism"].upper()
    if "sasl.jaas.config" in props:
        user, password = _jaas_credentials(props["sasl.jaas.config"], alias)
        conf["sasl_plain_username"] = user
        conf["sasl_plain_password"] = password
    if ca := _pem_location(props, "truststore", alias):
        conf["ssl_cafile"] = ca
    if cert := _pem_location(props, "keystore", alias):
        conf["ssl_certfile"] = cert
        conf["ssl_keyfile"] = props.get("ssl.key.location", cert)
    if "ssl.key.password" in props:
        conf["ssl_password"] = props["ssl.key.password"]
    if props.get("ssl.endpoint.identification.algorithm", "https") == "":
        conf["ssl_check_hostname"] = False
    if "client.id" in props:
        conf["client_id"] = props["client.id"]
    if "request.timeout.ms" in props:
        conf["request_timeout_ms"] = int(props["request.timeout.ms"])
    return conf
