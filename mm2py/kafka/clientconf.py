"""Translate Kafka Java-client settings (as MM2 files spell them) for our client libraries.

MM2 files carry Java client keys (``security.protocol``, ``sasl.jaas.config``,
``ssl.truststore.location`` ...). confluent-kafka (librdkafka) and kafka-python each want
their own spelling; this module is the only place that knows both. Java key and trust stores
(JKS, PKCS12) reach both through ``mm2py.kafka.tls``, on the driver and on every executor that
builds a client, read once per process.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Mapping

from mm2py.config.krb5jaas import is_gssapi
from mm2py.config.rdkafka_keys import RDKAFKA_RENAMED, RDKAFKA_SAME
from mm2py.errors import ConfigError, ConfigProblem
from mm2py.kafka.krb5conf import kafka_python_kerberos, rdkafka_kerberos
from mm2py.kafka.oauth import token_source
from mm2py.kafka.tls import client_tls, ssl_context

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')

# Java keys that have no meaning for our clients and are dropped on purpose.
_JAVA_ONLY = {
    "key.serializer",
    "value.serializer",
    "key.deserializer",
    "value.deserializer",
    "ssl.endpoint.identification.algorithm",
}
# kafka-python's defaults, kept when buffer sizes are added
_SOCKET_OPTIONS = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1), (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
# Java's connections.max.idle.ms = -1 (never close idle connections), for kafka-python
_NEVER_MS = 2**31 - 1


def _jaas_credentials(jaas: str, alias: str) -> tuple[str, str]:
    options = dict(_JAAS_OPTION.findall(jaas))
    if "username" not in options or "password" not in options:
        raise ConfigError(
            ConfigProblem(f"{alias}.sasl.jaas.config", "needs username=\"...\" and password=\"...\"")
        )
    return options["username"], options["password"]


def _token_source(props: Mapping[str, str], alias: str) -> object | None:
    """The OAUTHBEARER token source of a client (mm2py.kafka.oauth), None for other mechanisms."""
    return token_source(props, alias)


RDKAFKA_LOGGER = logging.getLogger("rdkafka")
# Broker connection retries are noise; failures reach the operator as mm2py errors.
# ``--log-level DEBUG`` lowers this (mm2py.logs).
RDKAFKA_LOGGER.setLevel(logging.CRITICAL)


def _rdkafka_renamed(conf: dict[str, object], props: Mapping[str, str], kind: str | None) -> None:
    """The Java keys librdkafka spells differently, converted (ranges clamped to librdkafka's)."""
    names = RDKAFKA_RENAMED[kind]

    def number(key: str) -> int | None:
        try:
            return int(props[key]) if key in props and key in names else None
        except ValueError:
            return None

    if (timeout := number("request.timeout.ms")) is not None:
        conf["socket.timeout.ms"] = min(max(timeout, 10), 300000)  # librdkafka's network timeout
    for java, rd in (("send.buffer.bytes", "socket.send.buffer.bytes"),
                     ("receive.buffer.bytes", "socket.receive.buffer.bytes")):
        if (size := number(java)) is not None:
            conf[rd] = min(max(size, 0), 100_000_000)  # Java's -1 (the OS's size) is librdkafka's 0
    if (wait := number("fetch.max.wait.ms")) is not None:
        conf["fetch.wait.max.ms"] = wait
    if (size := number("max.request.size")) is not None:
        conf["message.max.bytes"] = min(max(size, 1000), 1_000_000_000)
    if (memory := number("buffer.memory")) is not None:
        conf["queue.buffering.max.kbytes"] = min(max(-(-memory // 1024), 1), 2**31 - 1)
    codec = props.get("compression.type", "").strip().lower()
    if (level := number(f"compression.{codec}.level")) is not None and -1 <= level <= 12:
        conf["compression.level"] = level


def rdkafka_config(bootstrap: str, props: Mapping[str, str], alias: str, kind: str | None = None) -> dict[str, object]:
    """Settings for confluent-kafka clients; ``kind`` (consumer, producer, admin) adds that client's own settings.

    Every Java key with a librdkafka equivalent is passed on; ``mm2py.config.rdkafka_keys`` lists them.
    Callers set what mm2py decides itself (group.id, isolation level, acks) after this.
    """
    # librdkafka logs through Python logging, so our log setup decides what is shown;
    # connection failures surface as mm2py errors naming the cluster instead
    conf: dict[str, object] = {"bootstrap.servers": bootstrap, "logger": RDKAFKA_LOGGER}
    same = RDKAFKA_SAME[kind]
    for key, value in props.items():
        if key in same:
            conf[key] = value
    _rdkafka_renamed(conf, props, kind)
    if oauth := _token_source(props, alias):
        conf["oauth_cb"] = oauth  # librdkafka asks again before the token expires (and re-authenticates)
    elif "sasl.jaas.config" in props and not is_gssapi(props):
        user, password = _jaas_credentials(props["sasl.jaas.config"], alias)
        conf["sasl.username"] = user
        conf["sasl.password"] = password
    conf.update(rdkafka_kerberos(props, alias))
    tls = client_tls(props, alias)
    if tls.ca_pem is not None:
        conf["ssl.ca.pem"] = tls.ca_pem.decode("ascii")
    elif tls.ca_location:
        conf["ssl.ca.location"] = tls.ca_location
    if tls.certificate_pem is not None and tls.key_pem is not None:
        conf["ssl.certificate.pem"] = tls.certificate_pem.decode("ascii")
        conf["ssl.key.pem"] = tls.key_pem.decode("ascii")
    elif tls.certificate_location:
        conf["ssl.certificate.location"] = tls.certificate_location
        conf["ssl.key.location"] = tls.key_location
    if tls.key_password is not None:
        conf["ssl.key.password"] = tls.key_password
    if props.get("ssl.endpoint.identification.algorithm", "https") == "":
        conf["ssl.endpoint.identification.algorithm"] = "none"
    return conf


def kafka_python_config(bootstrap: str, props: Mapping[str, str], alias: str) -> dict[str, object]:
    """Settings for kafka-python's network client (the raw fetch/produce path).

    Connection-level Java settings (``mm2py.config.clients.RAW_CONNECTION``) and security; what a
    Fetch or Produce request carries is the copier's (``mm2py.source.copy.copy_settings.CopySettings``).
    """
    conf: dict[str, object] = {"bootstrap_servers": bootstrap.split(",")}
    if "security.protocol" in props:
        conf["security_protocol"] = props["security.protocol"].upper()
    if "sasl.mechanism" in props:
        conf["sasl_mechanism"] = props["sasl.mechanism"].upper()
    if oauth := _token_source(props, alias):
        conf["sasl_oauth_token_provider"] = oauth
    elif "sasl.jaas.config" in props and not is_gssapi(props):
        user, password = _jaas_credentials(props["sasl.jaas.config"], alias)
        conf["sasl_plain_username"] = user
        conf["sasl_plain_password"] = password
    if "sasl.kerberos.service.name" in props:
        conf["sasl_kerberos_service_name"] = props["sasl.kerberos.service.name"]
    conf.update(kafka_python_kerberos(props, alias))
    check_hostname = props.get("ssl.endpoint.identification.algorithm", "https") != ""
    tls = client_tls(props, alias)
    if tls.from_stores:  # kafka-python reads files only: a context built in memory instead
        conf["ssl_context"] = ssl_context(tls, check_hostname, alias)
    else:
        if tls.ca_location:
            conf["ssl_cafile"] = tls.ca_location
        if tls.certificate_location:
            conf["ssl_certfile"] = tls.certificate_location
            conf["ssl_keyfile"] = tls.key_location
        if tls.key_password is not None:
            conf["ssl_password"] = tls.key_password
    if not check_hostname:
        conf["ssl_check_hostname"] = False
    if "client.id" in props:
        conf["client_id"] = props["client.id"]
    if "client.dns.lookup" in props:
        conf["client_dns_lookup"] = props["client.dns.lookup"]
    for java in ("request.timeout.ms", "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms",
                 "reconnect.backoff.ms", "reconnect.backoff.max.ms", "metadata.max.age.ms"):
        if java in props:
            conf[java.replace(".", "_")] = int(props[java])
    if "connections.max.idle.ms" in props:
        idle = int(props["connections.max.idle.ms"])
        conf["connections_max_idle_ms"] = idle if idle >= 0 else _NEVER_MS
    options = list(_SOCKET_OPTIONS)
    for java, option in (("send.buffer.bytes", socket.SO_SNDBUF), ("receive.buffer.bytes", socket.SO_RCVBUF)):
        if int(props.get(java, -1)) > 0:  # -1: the operating system's size (and its autotuning)
            options.append((socket.SOL_SOCKET, option, int(props[java])))
    if len(options) > len(_SOCKET_OPTIONS):
        conf["socket_options"] = options
    return conf
