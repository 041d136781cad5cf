"""A small OIDC provider for dev clusters and tests: client-credentials tokens (RS256 JWTs) and their JWKS.

``POST /token`` (grant_type=client_credentials, HTTP Basic client id and secret, or
``client_id``/``client_secret`` in the form) answers ``{"access_token", "token_type",
"expires_in"}``; ``GET /jwks`` answers the public key as a JWK set, which brokers validate tokens
against (``sasl.oauthbearer.jwks.endpoint.url``). Tokens carry ``sub`` (the client id), ``aud``,
``iss``, ``iat``, ``exp`` = ``iat`` + ``lifetime_s`` and ``scope``.

The RSA key is made per server (never written to disk); the server listens on 127.0.0.1 only.
``issued`` and ``refused`` count answers, for tests. The constructor does no I/O: ``start()``
binds and serves from a daemon thread, ``stop()`` ends it.
"""

from __future__ import annotations

import argparse
import base64
import hmac
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Mapping
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

AUDIENCE = "kafka"
ISSUER = "mm2py-dev-oidc"
KEY_ID = "mm2py-dev"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _uint(number: int) -> str:
    return _b64(number.to_bytes((number.bit_length() + 7) // 8, "big"))


class OidcServer:
    """Issues RS256 tokens living ``lifetime_s`` to the ``clients`` (id -> secret) it knows."""

    def __init__(self, clients: Mapping[str, str], *, port: int = 0, lifetime_s: float = 60.0):
        self.clients = dict(clients)
        self.port = port
        self.lifetime_s = lifetime_s
        self.issued = 0
        self.refused = 0
        self._key: rsa.RSAPrivateKey | None = None
        self._server: ThreadingHTTPServer | None = None

    @property
    def token_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    @property
    def jwks_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/jwks"

    def start(self) -> OidcServer:
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="mm2py-dev-oidc", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def jwks(self) -> dict[str, object]:
        assert self._key is not None, "start() first"
        public = self._key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": KEY_ID,
                          "n": _uint(public.n), "e": _uint(public.e)}]}

    def issue(self, client_id: str, scope: str | None) -> str:
        """A signed JWT for ``client_id``."""
        assert self._key is not None, "start() first"
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": KEY_ID}
        claims = {"sub": client_id, "aud": AUDIENCE, "iss": ISSUER, "iat": now,
                  "exp": now + max(1, round(self.lifetime_s)), "scope": scope or ""}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def known(self, client_id: str, secret: str) -> bool:
        expected = self.clients.get(client_id)
        return expected is not None and hmac.compare_digest(expected.encode(), secret.encode())


def _credentials(headers: Message, form: Mapping[str, str]) -> tuple[str, str]:
    auth = headers.get("Authorization", "")
    if auth.startswith("Basic "):
        try:
            pair = base64.b64decode(auth[6:]).decode()
        except ValueError:
            return "", ""
        client_id, _, secret = pair.partition(":")
        return urllib.parse.unquote(client_id), urllib.parse.unquote(secret)
    return form.get("client_id", ""), form.get("client_secret", "")


def _handler(server: OidcServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # http.server's name
            pass  # quiet: requests carry credentials

        def _answer(self, status: int, body: Mapping[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # http.server's name
            if self.path.split("?")[0] == "/jwks":
                self._answer(200, server.jwks())
            else:
                self._answer(404, {"error": "not_found"})

        def do_POST(self) -> None:  # http.server's name
            length = int(self.headers.get("Content-Length") or 0)
            form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
            if self.path.split("?")[0] != "/token":
                self._answer(404, {"error": "not_found"})
                return
            if form.get("grant_type") != "client_credentials":
                self._answer(400, {"error": "unsupported_grant_type"})
                return
            client_id, secret = _credentials(self.headers, form)
            if not server.known(client_id, secret):
                server.refused += 1
                self._answer(401, {"error": "invalid_client", "error_description": "client authentication failed"})
                return
            server.issued += 1
            self._answer(200, {"access_token": server.issue(client_id, form.get("scope")), "token_type": "Bearer",
                               "expires_in": round(server.lifetime_s)})

    return Handler


def main(argv: list[str] | None = None) -> None:
    """``python -m mm2py.dev.oidc --port P --client mm2=secret``: serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--lifetime", type=float, default=3600.0, help="token lifetime in seconds")
    parser.add_argument("--client", action="append", default=[], metavar="ID=SECRET")
    args = parser.parse_args(argv)
    # secrets from the environment keep them off the command line (mm2py.dev.oidc_process)
    spelled = [*args.client, *filter(None, os.environ.get("MM2PY_DEV_OIDC_CLIENTS", "").split(","))]
    clients = dict(item.split("=", 1) for item in spelled) or {"mm2": "mm2-secret"}
    server = OidcServer(clients, port=args.port, lifetime_s=args.lifetime).start()
    print(f"token endpoint {server.token_url}, JWKS {server.jwks_url}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            time.sleep(3600)
    except (KeyboardInterrupt, SystemExit):
        server.stop()


if __name__ == "__main__":
    main()
