"""OAUTHBEARER tokens for every client of mm2py, refreshed before they expire.

``TokenSource`` is what both client libraries are given: kafka-python calls its ``token()``
(``sasl_oauth_token_provider``), librdkafka calls it as ``oauth_cb``. It holds only the client's
settings, so it pickles to Spark's executors; the token itself lives in a per-process cache
(``RefreshingToken`` per ``OAuthSettings.cache_key``), so every client of a worker signs in with
one token and the token endpoint is asked once per refresh, not once per connection.

Invariants:
- a token is handed out only while it is valid; it is replaced at ``RefreshPolicy.refresh_at``
  (Kafka's ``sasl.login.refresh.*`` semantics), and at the latest while it still has
  ``SIGN_IN_FLOOR_S`` (at most half its life) to live, so a connection signing in with it gets a
  session long enough for its first requests;
- a failed refresh keeps the current token while it is still valid and tries again 10 s later
  (as Java's refresh thread); an expired token is never handed out;
- no error message or ``repr`` carries the client secret or a token.
"""

from __future__ import annotations

import importlib
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kafka.net.sasl.oauth import AbstractTokenProvider

from mm2py.config.oauth import OAuthSettings, oauth_settings, uses_oauthbearer
from mm2py.errors import AuthenticationError, ConfigError, ConfigProblem
from mm2py.kafka.oidc_client import Token, TokenRequestError, request_token, token_from

if TYPE_CHECKING:
    from mm2py.config.model import MirrorMakerConfig

# Java's ExpiringCredentialRefreshingLogin: the pause before a failed refresh is tried again
RETRY_AFTER_FAILURE_S = 10.0
# A connection signing in gets a session that ends with its token: a token with only seconds
# left would give a session that ends before the connection's first requests arrive (seen with
# 20 s tokens on a loaded machine). Tokens are replaced while they still have this long (at most
# half their life) to live; tokens living minutes or hours keep Java's timing.
SIGN_IN_FLOOR_S = 10.0
Fetch = Callable[[], Token]


class RefreshingToken:
    """One token, fetched on first use and replaced when its refresh time comes (thread-safe).

    ``clock`` and ``draw`` (the jitter's random number) are parameters so that tests can drive
    time; nothing is fetched before the first ``current()``.
    """

    def __init__(self, fetch: Fetch, settings: OAuthSettings, *, clock: Callable[[], float] = time.time,
                 draw: Callable[[], float] = random.random):
        self._fetch = fetch
        self._policy = settings.refresh
        self._clock = clock
        self._draw = draw
        self._lock = threading.Lock()
        self._token: Token | None = None
        self._refresh_at = 0.0

    @property
    def refresh_at(self) -> float:
        """When the current token is replaced (epoch seconds); 0 before the first token."""
        return self._refresh_at

    def current(self) -> Token:
        """A valid token: the cached one, or a new one once its refresh time has come."""
        with self._lock:
            now = self._clock()
            if self._token is not None and now < self._refresh_at:
                return self._token
            try:
                token = self._fetch()
            except Exception:
                if self._token is not None and now < self._token.expiry:
                    self._refresh_at = now + RETRY_AFTER_FAILURE_S
                    return self._token
                raise
            self._token = token
            floor = min(SIGN_IN_FLOOR_S, (token.expiry - token.start) / 2)
            self._refresh_at = min(self._policy.refresh_at(now, token.start, token.expiry, self._draw()),
                                   token.expiry - floor)
            return token


def _provider_fetch(settings: OAuthSettings) -> Fetch:
    """The ``module:callable`` of ``sasl.oauthbearer.token.provider`` as a token fetch."""
    module, _, name = str(settings.provider).partition(":")
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)

    def fetch() -> Token:
        value, expiry = target()
        now = time.time()
        claims_token = token_from(str(value), now, float(expiry) - now, settings.sub_claim)
        return Token(str(value), min(now, claims_token.start), float(expiry), claims_token.principal)

    return fetch


def _fetch_for(settings: OAuthSettings) -> Fetch:
    if settings.provider:
        return _provider_fetch(settings)
    return lambda: request_token(settings)


_tokens: dict[tuple, RefreshingToken] = {}
_tokens_lock = threading.Lock()


def shared_token(settings: OAuthSettings) -> RefreshingToken:
    """This process's token for ``settings`` (made, without fetching, on first use)."""
    with _tokens_lock:
        token = _tokens.get(settings.cache_key)
        if token is None:
            token = _tokens[settings.cache_key] = RefreshingToken(_fetch_for(settings), settings)
        return token


class TokenSource(AbstractTokenProvider):
    """A client's OAUTHBEARER token, for kafka-python (``token()``) and librdkafka (``oauth_cb``).

    A failure to get a token is raised as ``AuthenticationError`` naming the cluster.
    """

    def __init__(self, settings: OAuthSettings, alias: str):
        self.settings = settings
        self.alias = alias

    def __repr__(self) -> str:
        where = self.settings.provider or self.settings.endpoint
        return f"TokenSource(cluster={self.alias}, from={where})"

    def _current(self) -> Token:
        try:
            return shared_token(self.settings).current()
        except TokenRequestError as e:
            raise AuthenticationError(f"no OAUTHBEARER token: {e}", cluster=self.alias) from None

    def token(self) -> str:
        return self._current().value

    def extensions(self) -> dict[str, str]:
        return dict(self.settings.extensions)

    def __call__(self, _oauthbearer_config: str | None = None) -> tuple[str, float, str, dict[str, str]]:
        """librdkafka's ``oauth_cb``: (token, expiry epoch seconds, principal, extensions)."""
        token = self._current()
        return token.value, token.expiry, token.principal or self.settings.client_id or "mm2py", self.extensions()


def token_source(props: Mapping[str, str], alias: str) -> TokenSource | None:
    """The token source of a client with Java settings ``props``; None unless it uses OAUTHBEARER."""
    return TokenSource(oauth_settings(props), alias) if uses_oauthbearer(props) else None


def check_tokens(config: MirrorMakerConfig) -> None:
    """``preflight`` for every client of the flows that run (named by cluster) and of each cluster."""
    preflight([(cluster.alias, props) for flow in config.enabled_flows for cluster in (flow.source, flow.target)
               for props in (cluster.consumer, cluster.producer, cluster.admin, cluster.client)])


def preflight(clients: Iterable[tuple[str, Mapping[str, str]]]) -> None:
    """Get one token per distinct OAUTHBEARER client (``clients``: (cluster alias, its Java settings)).

    Raises one ``ConfigError`` listing every cluster whose token endpoint refused its client
    credentials (a wrong secret cannot start); an endpoint that cannot be reached now is left to
    the clients, which retry it.
    """
    problems: list[ConfigProblem] = []
    seen: set[tuple] = set()
    for prefix, props in clients:
        if not uses_oauthbearer(props):
            continue
        settings = oauth_settings(props)
        if settings.cache_key in seen:
            continue
        seen.add(settings.cache_key)
        try:
            shared_token(settings).current()
        except TokenRequestError as e:
            if e.refused:
                key = "sasl.oauthbearer.token.provider" if settings.provider else "sasl.jaas.config"
                problems.append(ConfigProblem(f"{prefix}.{key}", f"the client credentials of client id "
                                              f"'{settings.client_id}' were refused: {e}"))
        except Exception as e:  # a provider callable's own failure, named
            if settings.provider:
                problems.append(ConfigProblem(f"{prefix}.sasl.oauthbearer.token.provider",
                                              f"{settings.provider} failed: {type(e).__name__}: {e}"))
    if problems:
        raise ConfigError(problems)
