"""mm2py.redact: which settings are secrets, and what ``hide`` blanks in printed text."""

from __future__ import annotations

import io
import json

from mm2py import redact
from mm2py.config import load_text


def test_secret_settings_are_the_passwords_client_secrets_and_jaas_credentials() -> None:
    found = redact.secret_values({
        "A.ssl.keystore.password": "ks-pw-1", "B.consumer.ssl.key.password": "key-pw-2",
        "A.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                              'username="alice" password="plain-pw-3";',
        "B.sasl.jaas.config": 'x.OAuthBearerLoginModule required clientId="mm2" clientSecret="oauth-4";',
        "C.sasl.oauthbearer.client.credentials.client.secret": "oauth-5",
        "A.bootstrap.servers": "127.0.0.1:9092", "A.ssl.truststore.location": "/etc/ca.pem",
    })
    assert sorted(found) == ["key-pw-2", "ks-pw-1", "oauth-4", "oauth-5", "plain-pw-3"]


def test_hide_blanks_registered_values_in_every_form_a_log_shows() -> None:
    secret = 'pw"with\\quote-6'
    redact.register([secret])
    line = json.dumps({"event": "x", "value": secret}) + f" {secret} {secret!r}"
    assert secret not in redact.hide(line) and json.dumps(secret)[1:-1] not in redact.hide(line)
    assert redact.hide(line).count(redact.HIDDEN) == 3


def test_hide_blanks_sasl_bytes_and_bearer_tokens_whatever_the_values() -> None:
    request = "Request 3: SaslAuthenticateRequest(version=2, auth_bytes=b'u\\x00u\\x00not-registered-7')"
    assert redact.hide(request) == f"Request 3: SaslAuthenticateRequest(version=2, auth_bytes=b'{redact.HIDDEN}')"
    assert redact.hide("Authorization: Bearer eyJhbGciOi.eyJzdWIi.c2ln") == f"Authorization: Bearer {redact.HIDDEN}"


def test_loading_a_file_registers_its_secrets_and_the_stream_hides_them(monkeypatch) -> None:
    monkeypatch.setenv("MM2PY_TEST_REDACT_PW", "from-env-secret-8")
    load_text("config.providers = env\n"
              "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
              "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
              "A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = PLAIN\n"
              "A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
              'username="u" password="${env:MM2PY_TEST_REDACT_PW}";\n'
              "A->B.enabled = true\n")
    out = io.StringIO()
    stream = redact.HidingStream(out)
    stream.write("login with from-env-secret-8 to a:9092\n")
    assert out.getvalue() == f"login with {redact.HIDDEN} to a:9092\n"
