"""Issue 44 part 3: Kerberos JAAS lines as MM2 files write them, and what each client library is given."""

from __future__ import annotations

import pytest

from mm2py.config import load_text
from mm2py.config.krb5jaas import Krb5Login, jaas_options, parse_krb5_login
from mm2py.errors import ConfigError
from mm2py.kafka import krb5login
from mm2py.kafka.clientconf import kafka_python_config, rdkafka_config

KEYTAB = ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
          'keyTab="/etc/security/mm2.keytab" principal="mm2@EXAMPLE.COM";')


@pytest.fixture(autouse=True)
def private_env(monkeypatch, tmp_path):
    """Each test starts without a Kerberos login in the process environment."""
    for name in ("KRB5CCNAME", "KRB5_CLIENT_KTNAME", krb5login.LOGIN_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(krb5login.tempfile, "tempdir", str(tmp_path))


def test_keytab_login_is_read_with_quoted_and_bare_values():
    assert parse_krb5_login(KEYTAB, "A") == Krb5Login("mm2@EXAMPLE.COM", keytab="/etc/security/mm2.keytab")
    module, options = jaas_options(KEYTAB)
    assert module.endswith("Krb5LoginModule") and options["useKeyTab"] == "true" and options["storeKey"] == "true"


def test_ticket_cache_login():
    login = parse_krb5_login("com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true;", "A")
    assert login == Krb5Login(None) and not login.uses_keytab


@pytest.mark.parametrize(("jaas", "why"), [
    ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true principal="a@R";', "needs keyTab"),
    ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k";', "needs principal"),
    ('com.sun.security.auth.module.Krb5LoginModule required keyTab="/k" principal="a@R";', "useKeyTab is not true"),
    ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true useTicketCache=true keyTab="/k" '
     'principal="a@R";', "choose one"),
    ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=yes keyTab="/k" principal="a@R";',
     "true or false"),
    ('com.sun.security.auth.module.Krb5LoginModule required useFirstPass=true;', "not supported"),
    ('org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";', "needs com.sun"),
    ("Krb5LoginModule", "expected"),
])
def test_unsupported_combinations_are_one_named_problem(jaas, why):
    with pytest.raises(ConfigError) as err:
        parse_krb5_login(jaas, "A")
    assert len(err.value.problems) == 1 and err.value.problems[0].key == "A.sasl.jaas.config"
    assert why in err.value.problems[0].message


GSSAPI = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
          "sasl.jaas.config": KEYTAB}


def test_librdkafka_gets_keytab_and_principal_and_a_private_cache(tmp_path):
    conf = rdkafka_config("a:1", GSSAPI, "A", "admin")
    assert conf["sasl.mechanism"] == "GSSAPI" and conf["sasl.kerberos.service.name"] == "kafka"
    assert conf["sasl.kerberos.keytab"] == "/etc/security/mm2.keytab"
    assert conf["sasl.kerberos.principal"] == "mm2@EXAMPLE.COM"
    assert "sasl.username" not in conf
    cache = krb5login.os.environ["KRB5CCNAME"]
    assert cache.startswith(f"FILE:{tmp_path}/mm2py-krb5-")
    assert krb5login.os.environ["KRB5_CLIENT_KTNAME"] == "/etc/security/mm2.keytab"
    rdkafka_config("a:1", GSSAPI, "A", "consumer")
    assert krb5login.os.environ["KRB5CCNAME"] == cache, "one cache per process"


def test_kafka_python_gets_gssapi_and_the_service_name():
    conf = kafka_python_config("a:1", GSSAPI, "A")
    assert conf["sasl_mechanism"] == "GSSAPI" and conf["sasl_kerberos_service_name"] == "kafka"
    assert "sasl_plain_username" not in conf


def test_a_second_principal_in_one_process_is_refused():
    kafka_python_config("a:1", GSSAPI, "A")
    other = {**GSSAPI, "sasl.jaas.config": KEYTAB.replace("mm2@", "other@")}
    with pytest.raises(ConfigError, match="B.sasl.jaas.config.*one Kerberos principal per process"):
        kafka_python_config("b:1", other, "B")


def file_with(**a_keys: str) -> str:
    lines = ["clusters = A, B", "A.bootstrap.servers = a:1", "B.bootstrap.servers = b:1", "A->B.enabled = true"]
    return "\n".join(lines + [f"A.{k} = {v}" for k, v in a_keys.items()]) + "\n"


def test_an_mm2_file_with_kerberos_loads():
    text = file_with(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
                        "sasl.kerberos.service.name": "kafka", "sasl.jaas.config": KEYTAB})
    flow = load_text(text).enabled_flows[0]
    assert flow.source.consumer["sasl.mechanism"] == "GSSAPI"


@pytest.mark.parametrize(("drop", "key"), [("sasl.kerberos.service.name", "A.sasl.kerberos.service.name"),
                                           ("sasl.jaas.config", "A.sasl.jaas.config")])
def test_an_incomplete_kerberos_cluster_is_refused_naming_the_key(drop, key):
    keys = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
            "sasl.jaas.config": KEYTAB}
    del keys[drop]
    with pytest.raises(ConfigError) as err:
        load_text(file_with(**keys))
    assert [p.key for p in err.value.problems] == [key], err.value


def test_a_bad_jaas_line_is_refused_at_load():
    keys = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
            "sasl.jaas.config": KEYTAB.replace("useKeyTab=true", "useKeyTab=false")}
    with pytest.raises(ConfigError, match="A.sasl.jaas.config.*useKeyTab is not true"):
        load_text(file_with(**keys))


def test_a_missing_keytab_is_named_before_any_kdc_is_asked(tmp_path):
    login = Krb5Login("mm2@EXAMPLE.COM", keytab=str(tmp_path / "absent.keytab"))
    with pytest.raises(ConfigError, match=r"A.sasl.jaas.config.*keytab .*absent.keytab does not exist"):
        krb5login.check_login(login, "A", "kafka", "127.0.0.1")


def test_gssapi_is_refused_at_start_when_librdkafka_lacks_it(monkeypatch):
    """Stock confluent-kafka wheels have no GSSAPI: the run stops naming the key (its logins stubbed here)."""
    from mm2py.kafka import krb5conf

    keys = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
            "sasl.jaas.config": KEYTAB}
    flow = load_text(file_with(**keys)).enabled_flows[0]
    monkeypatch.setattr(krb5conf, "check_login", lambda *args: None)
    monkeypatch.setattr(krb5conf, "rdkafka_has_gssapi", lambda: False)
    with pytest.raises(ConfigError) as err:
        krb5conf.check_flows([flow])
    assert [p.key for p in err.value.problems] == ["A.sasl.mechanism"]
    assert "built without GSSAPI" in str(err.value) and "make kerberos-clients" in str(err.value)

