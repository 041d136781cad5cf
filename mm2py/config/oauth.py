"""SASL/OAUTHBEARER settings as MM2 files spell them, read once and checked at start.

A Java client signs in with OAUTHBEARER through a login callback handler. Kafka's own
``OAuthBearerLoginCallbackHandler`` (KIP-768) gets tokens from an OIDC provider with the client
credentials grant; mm2py does the same in Python (``mm2py.kafka.oauth``) from these keys:

- ``sasl.oauthbearer.token.endpoint.url``: where tokens are asked for (``http(s)://``);
- ``sasl.jaas.config``: ``OAuthBearerLoginModule required clientId="..." clientSecret="..."
  scope="..."`` (``extension_<name>="..."`` options become SASL extensions), or the Kafka 4.1+
  keys ``sasl.oauthbearer.client.credentials.client.id`` / ``.client.secret`` and
  ``sasl.oauthbearer.scope``;
- ``sasl.login.refresh.window.factor`` / ``.window.jitter`` / ``.min.period.seconds`` /
  ``.buffer.seconds``: when a token is replaced (Java's semantics, ``RefreshPolicy``);
- ``sasl.login.connect.timeout.ms``, ``sasl.login.read.timeout.ms``, ``sasl.login.retry.backoff.ms``
  / ``.max.ms``: the token request's time-outs and retries;
- ``sasl.oauthbearer.sub.claim.name``: the claim naming the principal;
- ``sasl.oauthbearer.header.urlencode``: URL-encode the client id and secret in the request's
  Basic authorization header.

Any other login callback handler is Java code mm2py cannot run: the mm2py key
``sasl.oauthbearer.token.provider = package.module:callable`` names a Python callable that stands
in for it (it returns ``(token, expiry in epoch seconds)``; MSK IAM's Python signer fits there).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

OAUTHBEARER = "OAUTHBEARER"
TOKEN_PROVIDER = "sasl.oauthbearer.token.provider"
LOGIN_HANDLER = "sasl.login.callback.handler.class"
TOKEN_ENDPOINT = "sasl.oauthbearer.token.endpoint.url"
CLIENT_ID = "sasl.oauthbearer.client.credentials.client.id"
CLIENT_SECRET = "sasl.oauthbearer.client.credentials.client.secret"
SCOPE = "sasl.oauthbearer.scope"
# Kafka's client-credentials handler under its current and its 3.x package names
KAFKA_LOGIN_HANDLERS = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
})
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_PROVIDER = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


@dataclass(frozen=True)
class RefreshPolicy:
    """When a token is replaced: Kafka's ``sasl.login.refresh.*`` (defaults and ranges are Java's)."""

    window_factor: float = 0.8  # refresh once this fraction of the token's life has passed ...
    window_jitter: float = 0.05  # ... plus up to this fraction more, at random
    min_period_s: float = 60.0  # never sooner than this after a refresh ...
    buffer_s: float = 300.0  # ... and at least this long before the token expires

    def refresh_at(self, now: float, start: float, expiry: float, draw: float) -> float:
        """The time to replace a token valid from ``start`` to ``expiry``, fetched at ``now``.

        ``draw`` is a random number in [0, 1) picking the jitter. As Java's
        ``ExpiringCredentialRefreshingLogin``: when the token has less time left than the two
        buffers together, both are ignored and the window applies to what is left; otherwise the
        window applies to the whole life, moved back to the end buffer and forward to the minimum
        period.
        """
        pct = self.window_factor + self.window_jitter * draw
        if now + self.min_period_s + self.buffer_s > expiry:
            return now + (expiry - now) * pct
        proposed = start + (expiry - start) * pct
        proposed = min(proposed, expiry - self.buffer_s)
        return max(proposed, now + self.min_period_s)


@dataclass(frozen=True)
class OAuthSettings:
    """One client's OAUTHBEARER settings: a token provider callable, or an OIDC client-credentials grant.

    Holds only strings and numbers, so it pickles to Spark's executors; the secret is never
    part of its ``repr``.
    """

    provider: str | None = None  # 'module:callable'
    endpoint: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    scope: str | None = None
    extensions: tuple[tuple[str, str], ...] = ()
    refresh: RefreshPolicy = RefreshPolicy()
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 10.0
    retry_backoff_s: float = 0.1
    retry_backoff_max_s: float = 10.0
    sub_claim: str = "sub"
    urlencode: bool = False

    @property
    def cache_key(self) -> tuple:
        """What a token depends on: clients with equal keys share one token per process."""
        return (self.provider, self.endpoint, self.client_id, self.client_secret, self.scope, self.extensions)


def uses_oauthbearer(props: Mapping[str, str]) -> bool:
    return props.get("sasl.mechanism", "").strip().upper() == OAUTHBEARER


def jaas_options(jaas: str) -> dict[str, str]:
    """The ``name="value"`` options of a JAAS line."""
    return dict(_JAAS_OPTION.findall(jaas))


def _number(props: Mapping[str, str], key: str, default: float, scale: float = 1.0) -> float:
    try:
        return float(props[key]) * scale if key in props else default
    except ValueError:
        return default


def oauth_settings(props: Mapping[str, str]) -> OAuthSettings:
    """A client's OAUTHBEARER settings from its Java keys (checked at start by ``problems``)."""
    options = jaas_options(props.get("sasl.jaas.config", ""))
    defaults = RefreshPolicy()
    refresh = RefreshPolicy(
        window_factor=_number(props, "sasl.login.refresh.window.factor", defaults.window_factor),
        window_jitter=_number(props, "sasl.login.refresh.window.jitter", defaults.window_jitter),
        min_period_s=_number(props, "sasl.login.refresh.min.period.seconds", defaults.min_period_s),
        buffer_s=_number(props, "sasl.login.refresh.buffer.seconds", defaults.buffer_s),
    )
    return OAuthSettings(
        provider=props.get(TOKEN_PROVIDER, "").strip() or None,
        endpoint=props.get(TOKEN_ENDPOINT, "").strip() or None,
        client_id=props.get(CLIENT_ID) or options.get("clientId"),
        client_secret=props.get(CLIENT_SECRET) or options.get("clientSecret"),
        scope=props.get(SCOPE) or options.get("scope"),
        extensions=tuple(sorted((k.removeprefix("extension_"), v) for k, v in options.items()
                                if k.startswith("extension_"))),
        refresh=refresh,
        connect_timeout_s=_number(props, "sasl.login.connect.timeout.ms", 10.0, 0.001),
        read_timeout_s=_number(props, "sasl.login.read.timeout.ms", 10.0, 0.001),
        retry_backoff_s=_number(props, "sasl.login.retry.backoff.ms", 0.1, 0.001),
        retry_backoff_max_s=_number(props, "sasl.login.retry.backoff.max.ms", 10.0, 0.001),
        sub_claim=props.get("sasl.oauthbearer.sub.claim.name", "sub").strip() or "sub",
        urlencode=props.get("sasl.oauthbearer.header.urlencode", "false").strip().lower() == "true",
    )


_RANGES = {
    "sasl.login.refresh.window.factor": (0.5, 1.0), "sasl.login.refresh.window.jitter": (0.0, 0.25),
    "sasl.login.refresh.min.period.seconds": (0, 900), "sasl.login.refresh.buffer.seconds": (0, 3600),
}


def problems(props: Mapping[str, str]) -> dict[str, str]:
    """Setting name -> why a client with these settings cannot sign in as configured ({} when it can).

    Checks the login callback handler for every mechanism, and for OAUTHBEARER that a token
    source is complete; never touches the network.
    """
    found: dict[str, str] = {}
    handler = props.get(LOGIN_HANDLER, "").strip()
    provider = props.get(TOKEN_PROVIDER, "").strip()
    oauth = uses_oauthbearer(props)
    if provider and not _PROVIDER.fullmatch(provider):
        found[TOKEN_PROVIDER] = f"expected 'package.module:callable', got {provider!r}"
    if handler and not provider and not (oauth and handler in KAFKA_LOGIN_HANDLERS):
        found[LOGIN_HANDLER] = (f"the Java login callback handler {handler} cannot run in mm2py; name a Python "
                                f"callable returning (token, expiry epoch seconds) in '{TOKEN_PROVIDER} = "
                                "package.module:callable' to stand in for it")
    if not oauth or provider:
        return found
    settings = oauth_settings(props)
    if settings.endpoint is None:
        found["sasl.mechanism"] = (f"OAUTHBEARER needs {TOKEN_ENDPOINT} (OIDC client credentials, with "
                                   f"{LOGIN_HANDLER} = {min(KAFKA_LOGIN_HANDLERS)}) or {TOKEN_PROVIDER}")
    elif not settings.endpoint.lower().startswith(("http://", "https://")):
        found[TOKEN_ENDPOINT] = f"expected an http:// or https:// URL, got {settings.endpoint!r}"
    elif not settings.client_id or not settings.client_secret:
        found["sasl.jaas.config"] = ('OAUTHBEARER with a token endpoint needs clientId="..." and clientSecret="..." '
                                     f"(or {CLIENT_ID} and {CLIENT_SECRET})")
    for key, (low, high) in _RANGES.items():
        if key in props:
            try:
                ok = low <= float(props[key]) <= high
            except ValueError:
                ok = False
            if not ok:
                found[key] = f"expected a number from {low} to {high}, got {props[key]!r}"
    return found
