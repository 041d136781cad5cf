"""A client's TLS material from its Java settings: PEM files as named, or stores read into PEM.

``client_tls`` reads what ``ssl.truststore.*``, ``ssl.keystore.*`` and ``ssl.key.password`` name
(``mm2py.kafka.stores`` reads JKS and PKCS12); ``mm2py.kafka.clientconf`` spells the result for
each client library. Java clients read no store unless ``security.protocol`` is SSL or SASL_SSL;
neither does mm2py.

Invariant: a key read from a store stays in memory. librdkafka takes PEM text; kafka-python
takes an ``ssl.SSLContext`` (``ssl_context``, one per process and material), whose chain and key
pass through a file of mode 0600 in a folder of mode 0700 made for the purpose and removed as
soon as the context has read it, so no process leaves key material behind, not even Spark's
Python workers, which end with ``os._exit`` and run no exit handlers.
"""

from __future__ import annotations

import functools
import os
import shutil
import ssl
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mm2py.errors import ConfigError, ConfigProblem
from mm2py.kafka.stores import Store, pem

if TYPE_CHECKING:  # mm2py.config imports this module (through clientconf)
    from mm2py.config.model import ClusterConfig


@dataclass(frozen=True)
class ClientTls:
    """Where a client's CA and certificate come from: a PEM file the settings name, or PEM read from a store."""

    ca_location: str | None = None
    ca_pem: bytes | None = None
    certificate_location: str | None = None  # a PEM key store (KIP-651) holds the chain and the key
    key_location: str | None = None
    key_password: str | None = None  # for a key the settings give as PEM; a key read from a store is plain
    certificate_pem: bytes | None = None
    key_pem: bytes | None = None

    @property
    def from_stores(self) -> bool:
        return self.ca_pem is not None or self.key_pem is not None


def _store(props: Mapping[str, str], kind: str, alias: str) -> Store | None:
    location = props.get(f"ssl.{kind}.location", "").strip()
    if not location:
        return None
    return Store(alias, kind, location, props.get(f"ssl.{kind}.type"), props.get(f"ssl.{kind}.password"),
                 props.get("ssl.key.password") if kind == "keystore" else None)


def client_tls(props: Mapping[str, str], alias: str) -> ClientTls:
    """The TLS material of a client's settings; empty without TLS. ConfigError for a store that cannot be read."""
    if not props.get("security.protocol", "PLAINTEXT").strip().upper().endswith("SSL"):
        return ClientTls()
    found: dict[str, object] = {"key_password": props.get("ssl.key.password")}
    if (trust := _store(props, "truststore", alias)) is not None:
        converted = pem(trust)
        found.update(ca_pem=converted.certificates) if converted else found.update(ca_location=trust.location)
    if (keys := _store(props, "keystore", alias)) is not None:
        converted = pem(keys)
        if converted is None:
            found.update(certificate_location=keys.location,
                         key_location=props.get("ssl.key.location", keys.location))
        else:
            found.update(certificate_pem=converted.certificates, key_pem=converted.key, key_password=None)
    return ClientTls(**found)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=32)
def ssl_context(tls: ClientTls, check_hostname: bool, alias: str) -> ssl.SSLContext:
    """An SSLContext as kafka-python builds its own (TLS 1.2+, the CA or the system's, the client
    certificate), from ``tls`` in memory; built once per process for the same material."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    try:
        if tls.ca_pem is not None:
            context.load_verify_locations(cadata=tls.ca_pem.decode("ascii"))
        elif tls.ca_location:
            context.load_verify_locations(tls.ca_location)
        else:
            context.load_default_certs()
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(ConfigProblem(f"{alias}.ssl.truststore.location",
                                        f"cluster {alias}: the trust store's certificates do not load: {e}")) from None
    try:
        if tls.certificate_pem is not None and tls.key_pem is not None:
            _load_chain(context, tls.certificate_pem + tls.key_pem)
        elif tls.certificate_location:
            context.load_cert_chain(tls.certificate_location, tls.key_location, tls.key_password)
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(ConfigProblem(f"{alias}.ssl.keystore.location",
                                        f"cluster {alias}: the key store's key and certificate do not load: "
                                        f"{e}")) from None
    return context


def _load_chain(context: ssl.SSLContext, chain_and_key: bytes) -> None:
    """``load_cert_chain`` reads files only: a private one, removed as soon as it is read."""
    folder = tempfile.mkdtemp(prefix="mm2py-tls-")  # mode 0700
    try:
        path = os.path.join(folder, "client.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(chain_and_key)
        context.load_cert_chain(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def check_stores(clusters: Iterable[ClusterConfig]) -> None:
    """Read every store the clients of ``clusters`` name, now, so that a bad one stops a run before
    Spark starts: one ConfigError lists each problem once. Reading here fills the per-process cache."""
    problems: list[ConfigProblem] = []
    for cluster in clusters:
        for settings in (cluster.client, cluster.consumer, cluster.producer, cluster.admin):
            try:
                client_tls(settings, cluster.alias)
            except ConfigError as e:
                problems += [p for p in e.problems if p not in problems]
    if problems:
        raise ConfigError(problems)
