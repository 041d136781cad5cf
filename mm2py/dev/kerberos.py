"""A throw-away MIT Kerberos KDC on 127.0.0.1, and the GSSAPI listener of a dev cluster that uses it.

For the Kerberos tests and ``mm2py dev-cluster up --sasl-mechanism GSSAPI``: each cluster gets a
realm of its own in ``NAME/kdc/`` (krb5.conf, kdc.conf, the principal database, kdc.log,
kdc.pid and the keytabs), made with Debian's ``kdb5_util`` and ``kadmin.local`` and served by
``krb5kdc`` on one port (UDP and TCP). The system's /etc/krb5.conf is never read or written:
every tool gets ``KRB5_CONFIG``/``KRB5_KDC_PROFILE``, the broker's JVM
``-Djava.security.krb5.conf``, and clients of the cluster need ``KRB5_CONFIG`` (``client_env``).

Principals: ``kafka/127.0.0.1@REALM`` (the broker, also between brokers) and ``mm2@REALM`` (the
clients), each with a keytab.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from mm2py.errors import DevClusterError

REALM = "MM2PY.TEST"
SERVICE = "kafka"
CLIENT_PRINCIPAL = "mm2"
_DB_PASSWORD = "mm2py-dev-kdc"

_KRB5_CONF = """[libdefaults]
  default_realm = {realm}
  dns_lookup_realm = false
  dns_lookup_kdc = false
  dns_canonicalize_hostname = false
  rdns = false
  udp_preference_limit = 1
  default_ccache_name = FILE:{dir}/ccache-default
[realms]
  {realm} = {{
    kdc = 127.0.0.1:{port}
  }}
[domain_realm]
  127.0.0.1 = {realm}
  localhost = {realm}
"""

_KDC_CONF = """[kdcdefaults]
  kdc_listen = 127.0.0.1:{port}
  kdc_tcp_listen = 127.0.0.1:{port}
[realms]
  {realm} = {{
    database_name = {dir}/principal
    key_stash_file = {dir}/stash
    acl_file = {dir}/kadm5.acl
    kdc_listen = 127.0.0.1:{port}
    kdc_tcp_listen = 127.0.0.1:{port}
    max_life = 24h
    max_renewable_life = 7d
    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  }}
[logging]
  kdc = FILE:{dir}/kdc.log
"""


@dataclass(frozen=True)
class Kdc:
    """One throw-away realm: its folder, port and files."""

    directory: Path
    port: int
    realm: str = REALM

    @property
    def krb5_conf(self) -> Path:
        return self.directory / "krb5.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment Kerberos tools and clients of this realm need."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.directory / "kdc.conf")}

    def keytab(self, name: str) -> Path:
        return self.directory / f"{name.split('/')[0]}.keytab"

    def principal(self, name: str) -> str:
        return f"{name}@{self.realm}"


def _run(kdc: Kdc, cmd: list[str], what: str) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **kdc.env}, timeout=60,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError as e:
        raise DevClusterError(f"{cmd[0]} is not installed: `make kerberos` installs MIT Kerberos") from e
    if proc.returncode != 0:
        raise DevClusterError(f"{what} failed ({' '.join(cmd)}):\n{proc.stdout}{proc.stderr}")


def add_principal(kdc: Kdc, name: str, keytab: Path | None = None) -> Path:
    """Create ``name@REALM`` with a random key and write its keytab (default ``kdc.keytab(name)``)."""
    keytab = keytab or kdc.keytab(name)
    principal = kdc.principal(name)
    _run(kdc, ["kadmin.local", "-r", kdc.realm, "-q", f"addprinc -randkey {principal}"], f"adding {principal}")
    _run(kdc, ["kadmin.local", "-r", kdc.realm, "-q", f"ktadd -k {keytab} {principal}"], f"keytab of {principal}")
    return keytab


def _pid(kdc: Kdc) -> int | None:
    pid_file = kdc.directory / "kdc.pid"
    text = pid_file.read_text().strip() if pid_file.exists() else ""
    if not text:
        return None
    try:
        cmdline = Path(f"/proc/{text}/cmdline").read_bytes()
    except OSError:
        return None
    return int(text) if b"krb5kdc" in cmdline else None


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def start_kdc(directory: Path, port: int, realm: str = REALM, timeout: float = 30) -> Kdc:
    """Start the KDC of ``directory`` (a new realm with the broker's and the clients' principals, or the one there)."""
    kdc = Kdc(Path(directory), port, realm)
    if _pid(kdc) is not None:
        return kdc
    kdc.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fresh = not (kdc.directory / "principal").exists()
    fields = {"realm": realm, "dir": kdc.directory, "port": port}
    kdc.krb5_conf.write_text(_KRB5_CONF.format(**fields))
    (kdc.directory / "kdc.conf").write_text(_KDC_CONF.format(**fields))
    (kdc.directory / "kadm5.acl").write_text(f"*/admin@{realm} *\n")
    if fresh:
        _run(kdc, ["kdb5_util", "create", "-s", "-r", realm, "-P", _DB_PASSWORD], f"creating realm {realm}")
        add_principal(kdc, f"{SERVICE}/127.0.0.1")
        add_principal(kdc, CLIENT_PRINCIPAL)
    with open(kdc.directory / "kdc.out", "wb") as out:
        proc = subprocess.Popen(["krb5kdc", "-n", "-r", realm], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env={**os.environ, **kdc.env}, start_new_session=True)
    (kdc.directory / "kdc.pid").write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + timeout
    while not _answers(port):
        if proc.poll() is not None or time.monotonic() >= deadline:
            stop_kdc(kdc.directory)
            raise DevClusterError(f"the KDC of {realm} did not listen on 127.0.0.1:{port}:\n"
                                  f"{(kdc.directory / 'kdc.out').read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    return kdc


def stop_kdc(directory: Path) -> None:
    """Stop the KDC started for ``directory``, if it runs."""
    kdc = Kdc(Path(directory), 0)
    pid = _pid(kdc)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        for _ in range(50):
            if _pid(kdc) is None or Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
            time.sleep(0.1)
        with contextlib.suppress(ChildProcessError):  # started by this process: reap it
            os.waitpid(pid, os.WNOHANG)
    (kdc.directory / "kdc.pid").unlink(missing_ok=True)


def _jaas(keytab: Path, principal: str) -> str:
    return (f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
            f'keyTab="{keytab}" principal="{principal}";')


def gssapi_listener(kdc: Kdc, protocol: str) -> tuple[dict[str, str], dict[str, str], tuple[str, ...]]:
    """(server, client, JVM options) that turn a SASL listener's PLAIN into GSSAPI.

    The client listener (also the inter-broker one) takes GSSAPI only, the broker signing in as
    ``kafka/127.0.0.1``; the controller listener keeps PLAIN (mm2py.dev.cluster composes it).
    A Java client names the service by the reverse lookup of the address it connects to, which
    is ``localhost`` for 127.0.0.1: the broker's own clients (transaction verification, markers)
    would ask for ``kafka/localhost`` and fail. The broker's JVM therefore resolves names from a
    hosts file of its own (``jdk.net.hosts.file``) without 127.0.0.1, so the lookup gives back
    the address; the machine's name maps to 127.0.1.1 there (Debian's convention) for
    ``InetAddress.getLocalHost``.
    """
    broker = kdc.principal(f"{SERVICE}/127.0.0.1")
    hosts = kdc.directory / "broker-hosts"
    hosts.write_text("# no 127.0.0.1 line: a reverse lookup of it gives the address (mm2py.dev.kerberos)\n"
                     f"127.0.1.1 {socket.gethostname()}\n")
    server = {
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.mechanism.inter.broker.protocol": "GSSAPI",
        "sasl.kerberos.service.name": SERVICE,
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        f"listener.name.{protocol.lower()}.gssapi.sasl.jaas.config": _jaas(kdc.keytab(SERVICE), broker),
    }
    client = {
        "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.service.name": SERVICE,
        "sasl.jaas.config": _jaas(kdc.keytab(CLIENT_PRINCIPAL), kdc.principal(CLIENT_PRINCIPAL)),
    }
    return server, client, (f"-Djava.security.krb5.conf={kdc.krb5_conf}", f"-Djdk.net.hosts.file={hosts}")


def answers_kafka_python(bootstrap: str, props: dict[str, str], alias: str, timeout: float) -> bool:
    """True when a broker answers a kafka-python client with these settings (Kerberos included) in time."""
    import kafka.errors as kerr
    from kafka.net.compat import KafkaNetClient

    from mm2py.kafka.clientconf import kafka_python_config

    try:
        client = KafkaNetClient(**kafka_python_config(bootstrap, props, alias))
    except (kerr.KafkaError, OSError):
        return False
    try:
        client.check_version(timeout_ms=int(timeout * 1000))
        return True
    except (kerr.KafkaError, OSError):
        return False
    finally:
        client.close()


def kerberize(directory: Path, protocol: str, kdc_port: int, server: dict[str, str], client: dict[str, str],
              jvm_options: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str], tuple[str, ...]]:
    """A SASL listener's settings with GSSAPI instead of PLAIN, its KDC started in ``directory/kdc``.

    Sets this process's ``KRB5_CONFIG`` to the realm's krb5.conf, so that its clients find the KDC.
    """
    if not protocol.upper().startswith("SASL_"):
        raise DevClusterError(f"GSSAPI needs a SASL listener (SASL_PLAINTEXT or SASL_SSL), not {protocol}")
    kdc = start_kdc(Path(directory) / "kdc", kdc_port)
    os.environ["KRB5_CONFIG"] = str(kdc.krb5_conf)
    extra_server, extra_client, jvm = gssapi_listener(kdc, protocol)
    return {**server, **extra_server}, {**client, **extra_client}, (*jvm_options, *jvm)
