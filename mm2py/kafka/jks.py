"""Java's JKS key store format, read (never written): certificates and PKCS#8 private keys.

What the JDK writes as ``-storetype JKS`` (``sun.security.provider.JavaKeyStore``): a big-endian
header (magic ``FEEDFEED``, version 1 or 2, entry count), then entries, each a private key
(encrypted with Sun's ``KeyProtector``: a SHA-1 keystream over the password and a 20-byte salt,
checked by a SHA-1 of the plain key) with its certificate chain, or a trusted certificate; last
a SHA-1 over the password, the words "Mighty Aphrodite" and every byte before it, which proves
the store password. Passwords enter both digests as UTF-16BE. JCEKS (``CECECECE``) is not read.
Pure functions on bytes: no I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass

MAGIC = b"\xfe\xed\xfe\xed"
JCEKS_MAGIC = b"\xce\xce\xce\xce"
_KEY_ENTRY, _CERT_ENTRY = 1, 2
_WHITENER = b"Mighty Aphrodite"
# 1.3.6.1.4.1.42.2.17.1.1, Sun's KeyProtector, DER-encoded
_KEY_PROTECTOR_OID = bytes.fromhex("060a2b060104012a0211010" "1")


class JksError(ValueError):
    """Bytes that are no JKS store, or a password that does not open it; the message holds no secret."""


class WrongPassword(JksError):
    """The store's or a key's password is not the one given."""


@dataclass(frozen=True)
class KeyEntry:
    alias: str
    encrypted_key: bytes  # the DER EncryptedPrivateKeyInfo
    chain: tuple[bytes, ...]  # DER certificates, the key's own first


@dataclass(frozen=True)
class JksStore:
    keys: tuple[KeyEntry, ...]
    certificates: tuple[bytes, ...]  # DER certificates of the trusted-certificate entries


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.at = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise JksError("truncated JKS store")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def u16(self) -> int:
        return int(struct.unpack(">H", self.take(2))[0])

    def u32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def utf(self) -> str:
        return self.take(self.u16()).decode("utf-8", errors="replace")  # Java's modified UTF-8, for aliases


def _password_bytes(password: str) -> bytes:
    return password.encode("utf-16-be")


def parse(data: bytes, password: str | None) -> JksStore:
    """The entries of a JKS store; the store password, when given, is checked (Java skips the check without one)."""
    r = _Reader(data)
    if r.take(4) != MAGIC:
        raise JksError("not a JKS store")
    version = r.u32()
    if version not in (1, 2):
        raise JksError(f"unknown JKS version {version}")
    keys: list[KeyEntry] = []
    certs: list[bytes] = []

    def certificate() -> bytes:
        if version == 2:
            r.utf()  # the certificate type, X.509
        return r.take(r.u32())

    for _ in range(r.u32()):
        tag = r.u32()
        alias = r.utf()
        r.take(8)  # creation date
        if tag == _KEY_ENTRY:
            encrypted = r.take(r.u32())
            keys.append(KeyEntry(alias, encrypted, tuple(certificate() for _ in range(r.u32()))))
        elif tag == _CERT_ENTRY:
            certs.append(certificate())
        else:
            raise JksError(f"entry {alias!r} is of a kind JKS does not hold ({tag})")
    body = r.at
    digest = r.take(20)
    if password is not None:
        expected = hashlib.sha1(_password_bytes(password) + _WHITENER + data[:body]).digest()
        if not hmac.compare_digest(digest, expected):
            raise WrongPassword("wrong store password, or the store was altered")
    return JksStore(tuple(keys), tuple(certs))


def _der(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER element at ``at``."""
    if at + 2 > len(data):
        raise JksError("truncated key")
    tag, length = data[at], data[at + 1]
    at += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[at:at + count], "big")
        at += count
    if at + length > len(data):
        raise JksError("truncated key")
    return tag, at, at + length


def decrypt_key(entry: KeyEntry, password: str) -> bytes:
    """The PKCS#8 DER private key of ``entry``, decrypted as Sun's KeyProtector does."""
    tag, start, end = _der(entry.encrypted_key, 0)
    if tag != 0x30:
        raise JksError(f"key {entry.alias!r} is not an EncryptedPrivateKeyInfo")
    tag, alg_start, alg_end = _der(entry.encrypted_key, start)
    if tag != 0x30 or not entry.encrypted_key[alg_start:alg_end].startswith(_KEY_PROTECTOR_OID):
        raise JksError(f"key {entry.alias!r} is protected by an algorithm other than JKS's")
    tag, data_start, data_end = _der(entry.encrypted_key, alg_end)
    if tag != 0x04:
        raise JksError(f"key {entry.alias!r} is not an EncryptedPrivateKeyInfo")
    protected = entry.encrypted_key[data_start:data_end]
    if len(protected) < 41:
        raise JksError(f"key {entry.alias!r} is truncated")
    salt, encrypted, check = protected[:20], protected[20:-20], protected[-20:]
    secret = _password_bytes(password)
    stream = bytearray()
    block = salt
    while len(stream) < len(encrypted):
        block = hashlib.sha1(secret + block).digest()
        stream += block
    plain = bytes(a ^ b for a, b in zip(encrypted, stream, strict=False))
    if not hmac.compare_digest(hashlib.sha1(secret + plain).digest(), check):
        raise WrongPassword(f"wrong password for key {entry.alias!r}")
    return plain
