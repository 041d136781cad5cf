"""Issue 44, part 2: JKS and PKCS12 stores reach librdkafka and kafka-python as PEM, the key kept in memory.

PKCS12 stores are made here with ``cryptography``; JKS stores with the JDK's ``keytool`` (the
real format; skipped without a JDK), once for the module.
"""

from __future__ import annotations

import datetime
import os
import shutil
import ssl
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from mm2py.config.model import ClusterConfig
from mm2py.errors import ConfigError
from mm2py.kafka import jks, stores
from mm2py.kafka import tls as tls_module
from mm2py.kafka.clientconf import kafka_python_config, rdkafka_config
from mm2py.kafka.tls import ClientTls, check_stores, client_tls

STORE_PW, KEY_PW = "store-Pa55", "key-Pa55w0rd"


def self_signed(name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    return key, cert


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """client.p12 (key store), trust.p12 (a certificate only), and with keytool ks.jks (key password
    differs from the store's) and ts.jks."""
    folder = tmp_path_factory.mktemp("stores")
    key, cert = self_signed("client")
    (folder / "client.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"client", key, cert, None, serialization.BestAvailableEncryption(STORE_PW.encode())))
    (folder / "trust.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [cert], serialization.BestAvailableEncryption(STORE_PW.encode())))
    (folder / "client.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keytool = shutil.which("keytool")
    if keytool:
        env = dict(os.environ, SP=STORE_PW, KP=KEY_PW)
        for cmd in (["-genkeypair", "-alias", "k", "-keyalg", "EC", "-dname", "CN=jks-client", "-storetype", "JKS",
                     "-keystore", "ks.jks", "-storepass:env", "SP", "-keypass:env", "KP"],
                    ["-importcert", "-alias", "ca", "-file", "client.pem", "-storetype", "JKS", "-keystore", "ts.jks",
                     "-storepass:env", "SP", "-noprompt"]):
            subprocess.run([keytool, *cmd], cwd=folder, env=env, check=True, capture_output=True)
    return {p.name: p for p in folder.iterdir()}


def tls(**props: str) -> dict[str, str]:
    return {"security.protocol": "SSL", **props}


def test_the_type_comes_from_the_content() -> None:
    assert stores.detect(jks.MAGIC + b"\0\0\0\2") == "JKS" and stores.detect(b"\n-----BEGIN CERT") == "PEM"
    assert stores.detect(b"\x30\x82") == "PKCS12" and stores.detect(jks.JCEKS_MAGIC) == "JCEKS"


def pkcs12_client(made: dict[str, Path]) -> dict[str, str]:
    return tls(**{"ssl.keystore.location": str(made["client.p12"]), "ssl.keystore.type": "PKCS12",
                  "ssl.keystore.password": STORE_PW, "ssl.key.password": STORE_PW,
                  "ssl.truststore.location": str(made["trust.p12"]), "ssl.truststore.password": STORE_PW})


def test_pkcs12_stores_reach_librdkafka_as_pem_text(made: dict[str, Path]) -> None:
    found = client_tls(pkcs12_client(made), "B")
    assert found.ca_pem == found.certificate_pem == made["client.pem"].read_bytes()
    assert found.key_pem and found.key_password is None
    serialization.load_pem_private_key(found.key_pem, None)  # plain: it never leaves memory
    conf = rdkafka_config("b:1", pkcs12_client(made), "B")
    assert conf["ssl.ca.pem"] == made["client.pem"].read_text() and conf["ssl.key.pem"] == found.key_pem.decode()
    assert not {"ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password"} & set(conf)


def test_kafka_python_gets_a_context_and_no_file_is_left(made: dict[str, Path]) -> None:
    before = set(Path(tempfile.gettempdir()).glob("mm2py-tls-*"))
    conf = kafka_python_config("b:1", pkcs12_client(made), "B")
    context = conf["ssl_context"]
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert not {"ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password"} & set(conf)
    assert set(Path(tempfile.gettempdir()).glob("mm2py-tls-*")) == before
    unchecked = {**pkcs12_client(made), "ssl.endpoint.identification.algorithm": ""}
    assert not kafka_python_config("b:1", unchecked, "B")["ssl_context"].check_hostname


def test_the_key_passes_through_a_private_file_only_while_it_is_loaded() -> None:
    seen: list[tuple[int, int, bytes]] = []

    class Context:
        path = ""

        def load_cert_chain(self, path: str) -> None:
            seen.append((stat.S_IMODE(os.stat(path).st_mode), stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode),
                         Path(path).read_bytes()))
            self.path = path

    context = Context()
    tls_module._load_chain(context, b"chain and key")  # type: ignore[arg-type]
    assert seen == [(0o600, 0o700, b"chain and key")] and not os.path.exists(os.path.dirname(context.path))


def test_a_store_is_read_once_per_process(made: dict[str, Path]) -> None:
    store = stores.Store("B", "truststore", str(made["trust.p12"]), None, STORE_PW)
    assert stores.pem(store) is stores.pem(stores.Store("B", "truststore", str(made["trust.p12"]), "JKS", STORE_PW))
    first, again = (kafka_python_config("b:1", pkcs12_client(made), "B")["ssl_context"] for _ in range(2))
    assert first is again


def test_pem_stays_as_it_is_and_nothing_is_read_without_tls(made: dict[str, Path]) -> None:
    pem = str(made["client.pem"])
    assert rdkafka_config("b:1", tls(**{"ssl.truststore.location": pem}), "B")["ssl.ca.location"] == pem
    assert kafka_python_config("b:1", tls(**{"ssl.truststore.location": pem}), "B")["ssl_cafile"] == pem
    assert client_tls({"ssl.truststore.location": "/no/such/store.jks"}, "B") == ClientTls()


@pytest.mark.skipif(shutil.which("keytool") is None, reason="needs the JDK's keytool")
def test_jks_stores_as_keytool_writes_them(made: dict[str, Path]) -> None:
    parsed = jks.parse(made["ks.jks"].read_bytes(), STORE_PW)
    assert [k.alias for k in parsed.keys] == ["k"] and parsed.certificates == ()
    found = client_tls(tls(**{"ssl.keystore.location": str(made["ks.jks"]), "ssl.keystore.password": STORE_PW,
                              "ssl.key.password": KEY_PW, "ssl.truststore.location": str(made["ts.jks"]),
                              "ssl.truststore.password": STORE_PW}), "B")
    assert found.ca_pem == made["client.pem"].read_bytes() and found.key_pem and found.certificate_pem
    key = serialization.load_pem_private_key(found.key_pem, None)
    cert = x509.load_pem_x509_certificate(found.certificate_pem)
    assert cert.subject.rfc4514_string() == "CN=jks-client" and key.public_key() == cert.public_key()
    # Java reads a JKS trust store without its password (unchecked); so does mm2py
    assert client_tls(tls(**{"ssl.truststore.location": str(made["ts.jks"])}), "B").ca_pem


def bad_stores(made: dict[str, Path], tmp: Path) -> dict[str, tuple[dict[str, str], str]]:
    unreadable = tmp / "gone.jks"
    jceks = tmp / "x.jceks"
    jceks.write_bytes(jks.JCEKS_MAGIC + b"\0" * 40)
    cases = {
        "wrong PKCS12 password": ({"ssl.keystore.location": str(made["client.p12"]),
                                   "ssl.keystore.password": "wrong-guess"}, "B.ssl.keystore.password"),
        "unreadable store": ({"ssl.truststore.location": str(unreadable)}, "B.ssl.truststore.location"),
        "PEM named PKCS12": ({"ssl.truststore.location": str(made["client.pem"]), "ssl.truststore.type": "PKCS12",
                              "ssl.truststore.password": STORE_PW}, "B.ssl.truststore.type"),
        "JCEKS": ({"ssl.truststore.location": str(jceks), "ssl.truststore.password": STORE_PW},
                  "B.ssl.truststore.location"),
        "a type mm2py cannot read": ({"ssl.keystore.location": str(made["client.p12"]), "ssl.keystore.type": "BCFKS",
                                      "ssl.keystore.password": STORE_PW}, "B.ssl.keystore.type"),
        "a PKCS12 store without its password": ({"ssl.keystore.location": str(made["client.p12"])},
                                                "B.ssl.keystore.password"),
    }
    if "ks.jks" in made:
        cases["wrong JKS store password"] = ({"ssl.keystore.location": str(made["ks.jks"]),
                                              "ssl.keystore.password": "wrong-guess", "ssl.key.password": KEY_PW},
                                             "B.ssl.keystore.password")
        cases["wrong JKS key password"] = ({"ssl.keystore.location": str(made["ks.jks"]),
                                            "ssl.keystore.password": STORE_PW, "ssl.key.password": "wrong-guess"},
                                           "B.ssl.key.password")
    return cases


@pytest.mark.parametrize("case", ["wrong PKCS12 password", "unreadable store", "PEM named PKCS12", "JCEKS",
                                  "a type mm2py cannot read", "a PKCS12 store without its password",
                                  "wrong JKS store password", "wrong JKS key password"])
def test_a_bad_store_is_one_line_naming_cluster_and_key_never_a_password(
        case: str, made: dict[str, Path], tmp_path: Path) -> None:
    cases = bad_stores(made, tmp_path)
    if case not in cases:
        pytest.skip("needs the JDK's keytool")
    props, key = cases[case]
    for build in (lambda p: rdkafka_config("b:1", p, "B"), lambda p: kafka_python_config("b:1", p, "B")):
        with pytest.raises(ConfigError) as err:
            build(tls(**props))
        message = str(err.value)
        assert "\n" not in message and f"key '{key}'" in message and "cluster B" in message, message
        assert "wrong-guess" not in message and STORE_PW not in message and KEY_PW not in message


def test_every_bad_store_of_a_run_is_named_before_spark_starts(made: dict[str, Path], tmp_path: Path) -> None:
    wrong = tls(**{"ssl.keystore.location": str(made["client.p12"]), "ssl.keystore.password": "wrong-guess"})
    gone = tls(**{"ssl.truststore.location": str(tmp_path / "gone.p12")})
    with pytest.raises(ConfigError) as err:
        check_stores([ClusterConfig("A", "a:1", consumer=wrong, producer=wrong), ClusterConfig("B", "b:1", admin=gone),
                      ClusterConfig("C", "c:1", client=pkcs12_client(made))])
    assert [p.key for p in err.value.problems] == ["A.ssl.keystore.password", "B.ssl.truststore.location"]
