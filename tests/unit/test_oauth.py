"""OAUTHBEARER: the token provider's refresh timing (fake clock), the settings checks, both client
libraries' wiring, the kept connections' session renewal, and the dev OIDC provider."""

from __future__ import annotations

import pickle
import types

import pytest

from mm2py.config import load_text
from mm2py.config.oauth import RefreshPolicy, oauth_settings, problems
from mm2py.errors import AuthenticationError, ConfigError
from mm2py.kafka import reauth
from mm2py.kafka.clientconf import kafka_python_config, rdkafka_config
from mm2py.kafka.oauth import RETRY_AFTER_FAILURE_S, RefreshingToken, TokenSource, preflight
from mm2py.kafka.oidc_client import Token, TokenRequestError, jwt_claims, request_token
from tests.fakes.clock import Clock

BASE = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="mm2" '
        'clientSecret="{secret}" scope="kafka";')


def oauth_props(url: str = "http://127.0.0.1:1/token", secret: str = "s3cret", **extra: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": HANDLER, "sasl.oauthbearer.token.endpoint.url": url,
            "sasl.jaas.config": JAAS.format(secret=secret), **extra}


def file_for(alias: str, props: dict[str, str]) -> str:
    return BASE + "".join(f"{alias}.{k} = {v}\n" for k, v in props.items())


# -- refresh timing: Kafka's sasl.login.refresh.* rules ---------------------------------------------


def test_refresh_at_the_window_of_the_whole_life_when_the_buffers_fit():
    policy = RefreshPolicy(window_factor=0.8, window_jitter=0.05, min_period_s=60, buffer_s=300)
    # a 3600 s token fetched at its start: 80 % (+ jitter 0..5 %) of its life
    assert policy.refresh_at(1000, 1000, 4600, draw=0.0) == pytest.approx(1000 + 2880)
    assert policy.refresh_at(1000, 1000, 4600, draw=1.0) == pytest.approx(1000 + 3060)


def test_refresh_is_moved_back_to_the_end_buffer_and_forward_to_the_minimum_period():
    policy = RefreshPolicy(window_factor=0.95, window_jitter=0.0, min_period_s=60, buffer_s=300)
    assert policy.refresh_at(0, 0, 1000, draw=0.0) == pytest.approx(700)  # 950 is inside the last 300 s
    late = RefreshPolicy(window_factor=0.5, window_jitter=0.0, min_period_s=60, buffer_s=10)
    # issued long before it was fetched: half its life is already past, so not sooner than 60 s from now
    assert late.refresh_at(900, 0, 1200, draw=0.0) == pytest.approx(960)


def test_short_tokens_ignore_both_buffers_and_take_the_window_of_what_is_left():
    policy = RefreshPolicy()  # defaults: 0.8, 0.05, 60 s, 300 s
    assert policy.refresh_at(100, 100, 120, draw=0.0) == pytest.approx(116)  # a 20 s token: at 80 %



def test_a_token_is_fetched_once_and_replaced_at_its_refresh_time():
    clock, fetched = Clock(), []

    def fetch() -> Token:
        fetched.append(clock.now)
        return Token(f"t{len(fetched)}", clock.now, clock.now + 100)

    token = RefreshingToken(fetch, oauth_settings(oauth_props()), clock=clock, draw=lambda: 0.0)
    assert fetched == [], "nothing is fetched before first use"
    assert token.current().value == "t1" and token.refresh_at == pytest.approx(1080)
    for step in range(80):
        clock.now = 1000 + step
        assert token.current().value == "t1"
    clock.now = 1080
    assert token.current().value == "t2" and fetched == [1000, 1080]
    assert token.refresh_at == pytest.approx(1160)
    # five lifetimes: one fetch per 80 s, never an expired token
    for second in range(1080, 1500):
        clock.now = second
        current = token.current()
        assert current.expiry > clock.now
    assert len(fetched) == 1 + (1500 - 1 - 1000) // 80


def test_short_tokens_are_replaced_while_a_sign_in_still_gets_a_useful_session():
    clock, fetched = Clock(), []

    def fetch() -> Token:
        fetched.append(clock.now)
        return Token("t", clock.now, clock.now + 20)

    token = RefreshingToken(fetch, oauth_settings(oauth_props()), clock=clock, draw=lambda: 1.0)
    token.current()
    assert token.refresh_at == pytest.approx(1010), "Java's 85 % would leave 3 s: 10 s (half its life) are kept"
    for second in range(1000, 1200):
        clock.now = second
        assert token.current().expiry - clock.now >= 10


def test_a_failed_refresh_keeps_the_valid_token_and_retries_later_but_never_hands_out_an_expired_one():
    clock, answers = Clock(), []

    def fetch() -> Token:
        if answers and answers[-1] == "fail":
            raise TokenRequestError("endpoint down")
        return Token("good", clock.now, clock.now + 100)

    token = RefreshingToken(fetch, oauth_settings(oauth_props()), clock=clock, draw=lambda: 0.0)
    assert token.current().value == "good"
    answers.append("fail")
    clock.now = 1080  # refresh due (80 %), the endpoint fails: the token still has 20 s
    assert token.current().value == "good"
    assert token.refresh_at == pytest.approx(1080 + RETRY_AFTER_FAILURE_S)
    clock.now = 1101  # expired, and the endpoint still fails
    with pytest.raises(TokenRequestError):
        token.current()


# -- settings: accepted, refused ------------------------------------------------------------------------


def test_oidc_client_credentials_are_accepted_on_every_client():
    flow = next(f for f in load_text(file_for("B", oauth_props())).flows if f.name == "A->B")
    assert flow.target.producer["sasl.mechanism"] == "OAUTHBEARER"


def test_a_java_login_handler_is_refused_naming_the_python_key_that_stands_in():
    msk = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
    props = oauth_props(**{"sasl.login.callback.handler.class": msk})
    with pytest.raises(ConfigError) as err:
        load_text(file_for("B", props))
    found = {p.key: p.message for p in err.value.problems}
    assert "sasl.oauthbearer.token.provider" in found["B.sasl.login.callback.handler.class"]
    assert len(err.value.problems) == 1
    props["sasl.oauthbearer.token.provider"] = "mypkg.tokens:msk_token"
    load_text(file_for("B", props))  # the provider stands in: accepted


@pytest.mark.parametrize(("change", "key"), [
    ({"sasl.oauthbearer.token.endpoint.url": ""}, "sasl.mechanism"),
    ({"sasl.oauthbearer.token.endpoint.url": "ldap://x"}, "sasl.oauthbearer.token.endpoint.url"),
    ({"sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"},
     "sasl.jaas.config"),
    ({"sasl.login.refresh.window.factor": "0.2"}, "sasl.login.refresh.window.factor"),
    ({"sasl.oauthbearer.token.provider": "no colon"}, "sasl.oauthbearer.token.provider"),
])
def test_incomplete_oauth_settings_are_refused_naming_the_key(change: dict[str, str], key: str):
    props = {k: v for k, v in {**oauth_props(), **change}.items() if v}
    assert key in problems(props)


def test_kafka_4_1_client_credential_keys_are_read_too():
    props = oauth_props(**{"sasl.jaas.config": "x required;",
                           "sasl.oauthbearer.client.credentials.client.id": "c",
                           "sasl.oauthbearer.client.credentials.client.secret": "s", "sasl.oauthbearer.scope": "k"})
    settings = oauth_settings(props)
    assert (settings.client_id, settings.client_secret, settings.scope) == ("c", "s", "k")
    assert problems(props) == {}


# -- both client libraries get one token source, which pickles and never shows the secret ------------


def test_both_libraries_get_a_token_source_that_pickles_without_showing_the_secret():
    props = oauth_props(secret="do-not-show")
    rd = rdkafka_config("b:1", props, "B", "producer")
    kp = kafka_python_config("b:1", props, "B")
    assert isinstance(rd["oauth_cb"], TokenSource) and isinstance(kp["sasl_oauth_token_provider"], TokenSource)
    assert "sasl.username" not in rd and "sasl_plain_username" not in kp
    copy = pickle.loads(pickle.dumps(kp["sasl_oauth_token_provider"]))
    assert copy.settings == kp["sasl_oauth_token_provider"].settings
    assert "do-not-show" not in repr(copy) and "do-not-show" not in repr(copy.settings)


def test_a_token_source_that_cannot_get_a_token_names_the_cluster():
    props = oauth_props(url="http://127.0.0.1:9/token", **{"sasl.login.retry.backoff.max.ms": "0"})
    with pytest.raises(AuthenticationError) as err:
        TokenSource(oauth_settings(props), "B").token()
    assert "cluster=B" in str(err.value) and "s3cret" not in str(err.value)


# -- kept connections renew an ending SASL session -----------------------------------------------------


def conn(lifetime_ms: int, authenticated_at: float, in_flight: int = 0) -> types.SimpleNamespace:
    closed = []
    state = types.SimpleNamespace(
        connected=True, in_flight_requests=[object()] * in_flight, closed=closed,
        _reauth=types.SimpleNamespace(session_lifetime_ms=lifetime_ms, authenticated_at=authenticated_at,
                                      is_reauthenticating=False))
    state.close = lambda: closed.append(True)
    return state


def test_an_idle_connection_past_most_of_its_session_is_closed_before_the_next_request(monkeypatch):
    monkeypatch.setattr(reauth.time, "monotonic", lambda: 100.0)
    assert not reauth.renew_ending_session(conn(20_000, 90.0))  # 10 of 20 s
    assert reauth.renew_ending_session(ending := conn(20_000, 83.0))  # 17 of 20 s: past 80 %
    assert ending.closed == [True]
    assert not reauth.renew_ending_session(conn(20_000, 50.0, in_flight=1)), "busy: kafka-python re-authenticates"
    assert not reauth.renew_ending_session(conn(0, 0.0)), "no session lifetime: nothing to renew"


# -- the dev OIDC provider and the client-credentials request -----------------------------------------


@pytest.fixture
def oidc():
    from mm2py.dev.oidc import OidcServer

    server = OidcServer({"mm2": "s3cret"}, lifetime_s=30).start()
    yield server
    server.stop()


def test_client_credentials_get_a_signed_token_with_its_expiry(oidc):
    token = request_token(oauth_settings(oauth_props(oidc.token_url)))
    claims = jwt_claims(token.value)
    assert claims["sub"] == "mm2" and claims["aud"] == "kafka" and claims["scope"] == "kafka"
    assert token.expiry == claims["exp"] == claims["iat"] + 30 and token.principal == "mm2"
    assert oidc.jwks()["keys"][0]["alg"] == "RS256"


def test_a_refused_secret_is_a_config_error_naming_the_key_without_the_secret(oidc):
    with pytest.raises(ConfigError) as err:
        preflight([("B", oauth_props(oidc.token_url, secret="wrong-secret-value"))])
    message = str(err.value)
    assert "B.sasl.jaas.config" in message and "HTTP 401" in message and "invalid_client" in message
    assert "wrong-secret-value" not in message and oidc.refused == 1
    preflight([("B", oauth_props(oidc.token_url))])  # the right secret passes
