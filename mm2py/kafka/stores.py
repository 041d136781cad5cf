"""Java trust and key stores (JKS, PKCS12) read into the PEM that librdkafka and kafka-python take.

An MM2 file names stores as Java clients take them: ``ssl.truststore.location`` / ``.type`` /
``.password``, ``ssl.keystore.location`` / ``.type`` / ``.password`` and ``ssl.key.password``.
The type is ``ssl.*.type`` when set; unset, a PEM file is PEM and any other file is JKS, Java's
default. Like Java's key stores since JDK 9, ``JKS`` and ``PKCS12`` each read a file of the other
type too, so the content decides how it is read. A trust store gives every certificate it holds
(trusted entries and each key entry's own certificate, as Java trusts them); a key store its
first private key with that key's certificate chain. JKS is read by ``mm2py.kafka.jks``,
PKCS12 by ``cryptography``.

Invariants: what a store holds is returned in memory (``Pem``) and never written out here
(``mm2py.kafka.tls`` hands it to the clients). A store is read once per process (the cache is
keyed by its path, size, modification time, type and passwords), so Spark's Python workers,
which build clients for every task, read it once each. A store that cannot be read, or a wrong
password, is a one-line ConfigError naming the cluster and the key, never a password.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from mm2py.errors import ConfigError, ConfigProblem
from mm2py.kafka import jks

TYPES = ("JKS", "PKCS12", "PEM")


@dataclass(frozen=True)
class Store:
    """One store as the file names it: which kind, where, of what type, with which passwords."""

    alias: str
    kind: str  # "truststore" or "keystore"
    location: str
    type: str | None  # ssl.<kind>.type as written, None when unset
    password: str | None
    key_password: str | None = None  # ssl.key.password (key stores)

    def key(self, setting: str) -> str:
        return f"{self.alias}.ssl.{setting}"

    def error(self, setting: str, message: str) -> ConfigError:
        return ConfigError(ConfigProblem(self.key(setting), f"cluster {self.alias}: {message}"))


@dataclass(frozen=True)
class Pem:
    """What a store became, in memory: its certificates (a trust store's, or a key's chain) and the key."""

    certificates: bytes
    key: bytes | None = None  # PKCS#8, not encrypted


def detect(data: bytes) -> str:
    """A store's type from its first bytes: JKS, JCEKS, PEM, PKCS12 (DER), or unknown."""
    if data.startswith(jks.MAGIC):
        return "JKS"
    if data.startswith(jks.JCEKS_MAGIC):
        return "JCEKS"
    if data.lstrip()[:10] == b"-----BEGIN":
        return "PEM"
    return "PKCS12" if data[:1] == b"\x30" else "unknown"


def named_type(store: Store) -> str | None:
    """``ssl.<kind>.type`` checked: None when unset; ConfigError for a type mm2py cannot read."""
    if store.type is None or not store.type.strip():
        return None
    named = store.type.strip().upper()
    if named not in TYPES:
        raise store.error(f"{store.kind}.type", f"{named} stores cannot be read; JKS, PKCS12 and PEM can "
                                                 f"(keytool -importkeystore -deststoretype PKCS12 converts)")
    return named


def _certificates(store: Store, data: bytes, content: str) -> list[x509.Certificate]:
    """Every certificate a trust store holds."""
    if content == "JKS":
        parsed = jks.parse(data, store.password)
        der = [*parsed.certificates, *(entry.chain[0] for entry in parsed.keys if entry.chain)]
        return [x509.load_der_x509_certificate(d) for d in der]
    p12 = _pkcs12(store, data, store.password)
    return [c.certificate for c in ([p12.cert] if p12.cert else []) + list(p12.additional_certs)]


def _pkcs12(store: Store, data: bytes, *passwords: str | None) -> pkcs12.PKCS12KeyAndCertificates:
    for password in dict.fromkeys(passwords):
        with contextlib.suppress(ValueError):
            return pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
    raise jks.WrongPassword("wrong password, or not a PKCS12 store")


def _key_and_chain(store: Store, data: bytes, content: str) -> tuple[bytes, list[x509.Certificate]]:
    """The first private key of a key store (PKCS#8 PEM, unencrypted) and its certificate chain."""
    if content == "JKS":
        parsed = jks.parse(data, store.password)
        if not parsed.keys:
            raise jks.JksError("holds no private key")
        password = store.key_password if store.key_password is not None else store.password
        if password is None:
            raise store.error("key.password", "a JKS key store needs ssl.key.password or ssl.keystore.password "
                                              "to decrypt its key")
        der = jks.decrypt_key(parsed.keys[0], password)
        key = serialization.load_der_private_key(der, None)
        chain = [x509.load_der_x509_certificate(d) for d in parsed.keys[0].chain]
    else:
        # Java keeps one password for a PKCS12 store and its keys; the key's is tried too
        p12 = _pkcs12(store, data, store.password, store.key_password)
        if p12.key is None or p12.cert is None:
            raise jks.JksError("holds no private key with its certificate")
        key = p12.key
        chain = [p12.cert.certificate, *(c.certificate for c in p12.additional_certs)]
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    return pem, chain


_CACHE: dict[tuple[object, ...], Pem] = {}
_LOCK = threading.Lock()


def _fingerprint(store: Store, stat: os.stat_result, content: str) -> tuple[object, ...]:
    secrets = hashlib.sha256(repr((store.password, store.key_password)).encode()).hexdigest()
    return (store.kind, os.path.realpath(store.location), stat.st_size, stat.st_mtime_ns, content,
            secrets)


def pem(store: Store) -> Pem | None:
    """``store`` as PEM: None when it is a PEM file already (its location is used as it is)."""
    named = named_type(store)
    if named == "PEM":
        return None
    location = f"{store.kind}.location"
    try:
        stat = os.stat(store.location)
        data = Path(store.location).read_bytes()
    except OSError as e:
        raise store.error(location, f"cannot read {store.kind} {store.location!r}: {e.strerror}") from None
    content = detect(data)
    if content == "PEM":
        if named is not None:
            raise store.error(f"{store.kind}.type", f"{store.location!r} is a PEM file, not {named}: "
                                                    f"set ssl.{store.kind}.type=PEM")
        return None
    if content not in ("JKS", "PKCS12"):
        raise store.error(location, f"{store.location!r} is no JKS, PKCS12 or PEM store ({content})")
    with _LOCK:
        cache_key = _fingerprint(store, stat, content)
        if cache_key in _CACHE:
            return _CACHE[cache_key]
        try:
            if store.kind == "truststore":
                certs = _certificates(store, data, content)
                if not certs:
                    raise jks.JksError("holds no certificate")
                converted = Pem(_pem(certs))
            else:
                key, chain = _key_and_chain(store, data, content)
                converted = Pem(_pem(chain), key)
        except jks.WrongPassword:
            setting = f"{store.kind}.password"
            if store.password is None and store.key_password is None:
                raise store.error(setting, f"{store.location!r} is a {content} store that needs a password; "
                                           f"none is set") from None
            if store.kind == "keystore" and store.key_password is not None and content == "JKS":
                with contextlib.suppress(jks.JksError):
                    jks.parse(data, store.password)
                    setting = "key.password"  # the store opened: the key's password is wrong
            raise store.error(setting, f"cannot open {content} {store.kind} {store.location!r}: wrong password "
                                       f"(or the store is damaged)") from None
        except (jks.JksError, ValueError) as e:
            raise store.error(location, f"cannot read {content} {store.kind} {store.location!r}: {e}") from None
        _CACHE[cache_key] = converted
        return converted


def _pem(certs: list[x509.Certificate]) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
