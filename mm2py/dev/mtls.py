"""Mutual TLS for a dev cluster (``mm2py dev-cluster up --client-auth``): the broker requires a client certificate.

``client_auth_properties`` makes, once per cluster folder, a client key pair in a PKCS12 key
store (``client.p12``, its password random and kept beside it in a 0600 file, as Strimzi mounts
``user.p12`` with ``user.password``) and a PEM trust file for the broker (``client-trust.pem``:
its own certificate, for its inter-broker connections, and the client's). The broker gets
``ssl.client.auth = required``; clients get the key store as a Java client names it.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

from mm2py.errors import DevClusterError

KEYSTORE, PASSWORD_FILE, BROKER_TRUST = "client.p12", "client.p12.password", "client-trust.pem"


def _keytool(*args: str) -> None:
    proc = subprocess.run(["keytool", *args, "-noprompt"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise DevClusterError(f"creating the client certificate with keytool failed:\n{proc.stdout}{proc.stderr}")


def _password(directory: Path) -> str:
    """The key store's password: made once, readable by the owner alone."""
    file = directory / PASSWORD_FILE
    if file.exists():
        return file.read_text().strip()
    password = secrets.token_urlsafe(18)
    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(password + "\n")
    return password


def client_auth_properties(directory: Path, broker_pem: str) -> tuple[dict[str, str], dict[str, str]]:
    """(broker settings, Java client settings) that make the TLS listener require and present a client certificate."""
    keystore, trust = directory / KEYSTORE, directory / BROKER_TRUST
    password = _password(directory)
    if not keystore.exists():
        cert = directory / "client.pem"
        common = ("-storepass", password, "-keystore", str(keystore), "-storetype", "PKCS12")
        _keytool("-genkeypair", "-alias", "client", "-keyalg", "RSA", "-keysize", "2048", "-validity", "3650",
                 "-dname", "CN=mm2py-dev-client", "-keypass", password, *common)
        _keytool("-exportcert", "-rfc", "-alias", "client", "-file", str(cert), *common)
        trust.write_text(Path(broker_pem).read_text() + cert.read_text())
    server = {"ssl.client.auth": "required", "ssl.truststore.location": str(trust), "ssl.truststore.type": "PEM"}
    client = {"ssl.keystore.location": str(keystore), "ssl.keystore.type": "PKCS12",
              "ssl.keystore.password": password, "ssl.key.password": password}
    return server, client
