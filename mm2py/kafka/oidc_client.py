"""One OIDC client-credentials token request (RFC 6749 section 4.4), as Kafka's Java client makes it.

POST ``grant_type=client_credentials`` (and ``scope``) to the token endpoint with the client id
and secret in an HTTP Basic authorization header; the answer's ``access_token`` is the token and
its JWT ``exp`` claim (else the answer's ``expires_in``) its expiry. Connection failures and
5xx answers are retried with a doubling back-off up to ``sasl.login.retry.backoff.max.ms``; a 4xx
answer (a refused client) is not. The client secret never appears in an error.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from mm2py.config.oauth import OAuthSettings


class TokenRequestError(Exception):
    """The token endpoint could not be reached, or refused the request; ``refused``: it answered 4xx."""

    def __init__(self, message: str, *, refused: bool = False):
        super().__init__(message)
        self.refused = refused


@dataclass(frozen=True)
class Token:
    """An access token, when it was issued (``start``) and when it expires, in epoch seconds."""

    value: str
    start: float
    expiry: float
    principal: str | None = None


def jwt_claims(token: str) -> dict[str, object]:
    """The payload of a JWS compact token, unverified ({} when ``token`` is not one)."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return {}
    return claims if isinstance(claims, dict) else {}


def token_from(value: str, now: float, expires_in: object, sub_claim: str) -> Token:
    """A ``Token`` for ``value``: its expiry from its ``exp`` claim, else ``expires_in`` seconds from ``now``."""
    claims = jwt_claims(value)
    exp = claims.get("exp")
    if isinstance(exp, int | float):
        expiry = float(exp)
    elif isinstance(expires_in, int | float):
        expiry = now + float(expires_in)
    else:
        raise TokenRequestError("the token has no expiry (no exp claim, no expires_in)")
    iat = claims.get("iat")
    start = float(iat) if isinstance(iat, int | float) and iat <= now else now
    principal = claims.get(sub_claim)
    return Token(value, start, expiry, principal if isinstance(principal, str) else None)


def _authorization(settings: OAuthSettings) -> str:
    client_id, secret = settings.client_id or "", settings.client_secret or ""
    if settings.urlencode:
        client_id, secret = urllib.parse.quote(client_id, safe=""), urllib.parse.quote(secret, safe="")
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def _post_once(settings: OAuthSettings) -> dict[str, object]:
    form = {"grant_type": "client_credentials"}
    if settings.scope:
        form["scope"] = settings.scope
    request = urllib.request.Request(
        str(settings.endpoint), data=urllib.parse.urlencode(form).encode(), method="POST",
        headers={"Authorization": _authorization(settings), "Accept": "application/json",
                 "Content-Type": "application/x-www-form-urlencoded", "Cache-Control": "no-cache"})
    try:
        with urllib.request.urlopen(request, timeout=max(settings.connect_timeout_s, settings.read_timeout_s)) as r:
            body = r.read()
    except urllib.error.HTTPError as e:
        detail = _error_text(e.read())
        raise TokenRequestError(f"the token endpoint {settings.endpoint} answered HTTP {e.code}"
                                + (f" ({detail})" if detail else ""), refused=400 <= e.code < 500) from None
    except (OSError, ValueError) as e:
        raise TokenRequestError(f"the token endpoint {settings.endpoint} could not be reached: {e}") from None
    try:
        answer = json.loads(body)
    except ValueError:
        raise TokenRequestError(f"the token endpoint {settings.endpoint} answered something not JSON") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
        raise TokenRequestError(f"the token endpoint {settings.endpoint} answered without an access_token")
    return answer


def _error_text(body: bytes) -> str:
    """An OAuth error answer's ``error`` and ``error_description``, briefly (never echoed secrets: the
    endpoint's own words about the request)."""
    try:
        answer = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(answer, dict):
        return ""
    words = [str(answer[k]) for k in ("error", "error_description") if answer.get(k)]
    return ": ".join(words)[:200]


def request_token(settings: OAuthSettings, *, clock: Callable[[], float] = time.time,
                  sleep: Callable[[float], None] = time.sleep) -> Token:
    """A fresh token from ``settings.endpoint``; retries what may pass, raises ``TokenRequestError``."""
    backoff, waited = settings.retry_backoff_s, 0.0
    while True:
        try:
            answer = _post_once(settings)
            return token_from(str(answer["access_token"]), clock(), answer.get("expires_in"), settings.sub_claim)
        except TokenRequestError as e:
            if e.refused or waited + backoff > settings.retry_backoff_max_s:
                raise
        sleep(backoff)
        waited += backoff
        backoff = min(backoff * 2, settings.retry_backoff_max_s)
