"""Kerberos (``sasl.mechanism=GSSAPI``) settings of an MM2 file, for each client library, and the start check.

An MM2 file gives a Kerberos client ``sasl.kerberos.service.name`` and a ``sasl.jaas.config``
with ``Krb5LoginModule`` (``mm2py.config.krb5jaas``). librdkafka takes the keytab and principal
as ``sasl.kerberos.keytab`` / ``sasl.kerberos.principal`` and runs ``kinit`` itself; kafka-python
takes the service name and finds the ticket through the environment ``mm2py.kafka.krb5login``
sets up. ``check_flows`` logs every Kerberos client of the flows in before Spark starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from mm2py.config.krb5jaas import GSSAPI, is_gssapi, kerberos_login
from mm2py.errors import ConfigError, ConfigProblem
from mm2py.kafka.krb5login import check_login, use_login

if TYPE_CHECKING:
    from mm2py.config.model import ClusterConfig, FlowConfig

_NO_PROVIDER = "No provider for SASL mechanism GSSAPI"


def rdkafka_kerberos(props: Mapping[str, str], alias: str) -> dict[str, object]:
    """librdkafka settings of a GSSAPI client (empty when it is none); points the environment at its cache."""
    if not is_gssapi(props):
        return {}
    login = kerberos_login(props, alias)
    use_login(login, alias)
    if login.uses_keytab:
        return {"sasl.kerberos.keytab": login.keytab, "sasl.kerberos.principal": login.principal}
    # a ticket cache someone else's kinit keeps fresh: librdkafka must not run kinit itself
    return {"sasl.kerberos.min.time.before.relogin": 0,
            **({"sasl.kerberos.principal": login.principal} if login.principal else {})}


def kafka_python_kerberos(props: Mapping[str, str], alias: str) -> dict[str, object]:
    """kafka-python settings of a GSSAPI client (empty when it is none); points the environment at its cache."""
    if not is_gssapi(props):
        return {}
    use_login(kerberos_login(props, alias), alias)
    return {"sasl_mechanism": GSSAPI, "sasl_kerberos_service_name": props["sasl.kerberos.service.name"].strip()}


def _layers(flow: FlowConfig) -> Iterator[ClusterConfig]:
    yield from (c for c in (flow.source, flow.target, flow.offset_syncs) if c is not None)


def _kerberos_clients(flows: Iterable[FlowConfig]) -> dict[tuple[str, str, str], Mapping[str, str]]:
    """(alias, principal-and-keytab, first bootstrap host) -> settings, once per distinct login."""
    found: dict[tuple[str, str, str], Mapping[str, str]] = {}
    for flow in flows:
        for cluster in _layers(flow):
            host = cluster.bootstrap_servers.split(",")[0].strip().rsplit(":", 1)[0].strip("[]")
            for props in (cluster.client, cluster.consumer, cluster.producer, cluster.admin):
                if is_gssapi(props):
                    found.setdefault((cluster.alias, props.get("sasl.jaas.config", ""), host), props)
    return found


def rdkafka_has_gssapi() -> bool:
    """Whether confluent-kafka's librdkafka was built with Cyrus SASL (its Linux wheels are not)."""
    from confluent_kafka import KafkaException

    from mm2py.kafka.rdclients import producer

    try:
        producer({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": GSSAPI, "sasl.kerberos.kinit.cmd": "true",
                  "log_level": 0})  # its refused connection to port 1 is no news
    except KafkaException as e:
        if _NO_PROVIDER in str(e):
            return False
        raise
    return True


def check_flows(flows: Iterable[FlowConfig]) -> None:
    """Log every Kerberos client of ``flows`` in, as their first connection would; ConfigError on the first failure."""
    clients = _kerberos_clients(flows)
    for (alias, _jaas, host), props in clients.items():
        login = kerberos_login(props, alias)
        check_login(login, alias, props["sasl.kerberos.service.name"].strip(), host)
    if clients and not rdkafka_has_gssapi():
        import confluent_kafka

        alias = next(iter(clients))[0]
        raise ConfigError(ConfigProblem(
            f"{alias}.sasl.mechanism", f"the librdkafka {confluent_kafka.libversion()[0]} of confluent-kafka "
            f"{confluent_kafka.version()[0]} was built without GSSAPI (its Linux wheels are); install confluent-kafka "
            "built against a librdkafka with Cyrus SASL: make kerberos-clients (a .venv-krb), or pip install "
            "--no-binary confluent-kafka against such a librdkafka"))
