"""Kerberos credentials for mm2py's clients: a private ticket cache per process, filled from a keytab.

Both client libraries find Kerberos credentials through the process's environment: librdkafka
runs ``kinit`` into ``KRB5CCNAME`` and reads it back through Cyrus SASL, kafka-python asks the
``gssapi`` package for the default credentials. ``use_login`` points that environment at a cache
of mm2py's own (a 0700 folder, never the user's ``/tmp/krb5cc_*``) and at the keytab
(``KRB5_CLIENT_KTNAME``, from which MIT Kerberos renews the ticket). Spark's Python workers
inherit it from the driver; a worker elsewhere makes its own. Invariant: one process holds one
keytab identity; a second one is refused, since both libraries would share the one cache.

``check_login`` does at start what the clients would do at their first connection (a ticket
for the principal, then one for the brokers' service), so that a wrong principal, a keytab
without it, a missing file or a KDC that refuses or stays silent is one ``ConfigError`` naming
the cluster and key, within a bounded time.
"""

from __future__ import annotations

import os
import struct
import tempfile
import threading
from pathlib import Path

from mm2py.config.krb5jaas import Krb5Login
from mm2py.errors import ConfigError, ConfigProblem

# how the environment of this process (or the driver it was forked from) names its keytab login
LOGIN_ENV = "MM2PY_KRB5_LOGIN"
CHECK_TIMEOUT_S = 20.0
_lock = threading.Lock()


def _identity(login: Krb5Login) -> str:
    return f"{login.principal} {login.keytab}"


def use_login(login: Krb5Login, alias: str, key: str = "sasl.jaas.config") -> str | None:
    """Point this process's Kerberos environment at ``login``; the ticket cache it uses (None: the default).

    Idempotent for the same login; a different keytab login in the same process is a ConfigError.
    """
    if not login.uses_keytab:
        if login.ticket_cache:
            os.environ["KRB5CCNAME"] = login.ticket_cache
        return os.environ.get("KRB5CCNAME")
    with _lock:
        current, cache = os.environ.get(LOGIN_ENV), os.environ.get("KRB5CCNAME", "")
        if current is not None and current != _identity(login):
            raise ConfigError(ConfigProblem(
                f"{alias}.{key}", f"mm2py logs in as one Kerberos principal per process and already uses "
                f"{current.split(' ', 1)[0]}; run flows with another principal in a process of their own"))
        assert login.keytab is not None
        os.environ["KRB5_CLIENT_KTNAME"] = login.keytab
        if current is None or not Path(cache.removeprefix("FILE:")).parent.is_dir():
            folder = tempfile.mkdtemp(prefix="mm2py-krb5-")  # mode 0700: the tickets are secrets
            os.environ["KRB5CCNAME"] = f"FILE:{folder}/ccache"
            os.environ[LOGIN_ENV] = _identity(login)
            _prime(login, os.environ["KRB5CCNAME"])
        return os.environ["KRB5CCNAME"]


def _prime(login: Krb5Login, cache: str) -> None:
    """Make ``login.principal`` the cache's default, with its ticket from the keytab.

    Without it MIT Kerberos would log in as the keytab's first principal, which need not be the
    one the JAAS line names. Best effort: a failure here shows at the client's own login.
    """
    if login.keytab is None:
        return
    try:
        import gssapi

        name = gssapi.Name(login.principal, gssapi.NameType.kerberos_principal)
        keytab: dict[bytes | str, bytes | str] = {"client_keytab": login.keytab, "ccache": cache}
        creds = gssapi.Credentials(name=name, usage="initiate", store=keytab)
        creds.store(store={"ccache": cache}, usage="initiate", overwrite=True, set_default=True)
    except Exception:  # no gssapi package, no KDC: reported when a client connects
        return


def keytab_principals(path: Path) -> set[str] | None:
    """The principals a keytab file (MIT format 0x0502) holds keys of; None when it does not read as one."""
    data = path.read_bytes()
    if data[:2] != b"\x05\x02":
        return None
    found, pos = set(), 2
    try:
        while pos + 4 <= len(data):
            size = struct.unpack_from(">i", data, pos)[0]
            pos += 4
            if size > 0:
                entry, at = data[pos:pos + size], 2
                count = struct.unpack_from(">H", entry, 0)[0]
                parts = []
                for _ in range(count + 1):  # the realm, then the name's components
                    length = struct.unpack_from(">H", entry, at)[0]
                    parts.append(entry[at + 2:at + 2 + length].decode())
                    at += 2 + length
                found.add("/".join(parts[1:]) + "@" + parts[0])
            pos += abs(size)
    except (struct.error, UnicodeDecodeError):
        return None
    return found


def _gss_reason(error: BaseException) -> str:
    """The informative part of a GSSAPI error: its minor (mechanism) message when there is one."""
    text = " ".join(str(error).split())
    return text.rsplit("Minor (", 1)[-1].split("): ", 1)[-1] if "Minor (" in text else text


def _acquire(login: Krb5Login, service: str, host: str, cache: str | None) -> None:
    import gssapi

    creds = None
    if login.uses_keytab:
        assert login.principal is not None and login.keytab is not None
        name = gssapi.Name(login.principal, gssapi.NameType.kerberos_principal)
        store: dict[bytes | str, bytes | str] = {"client_keytab": login.keytab, **({"ccache": cache} if cache else {})}
        creds = gssapi.Credentials(name=name, usage="initiate", store=store)
    target = gssapi.Name(f"{service}@{host}", gssapi.NameType.hostbased_service)
    context = gssapi.SecurityContext(name=target, creds=creds, usage="initiate", mech=gssapi.MechType.kerberos)
    context.step()  # a ticket for the principal (from the keytab) and one for service/host


def check_login(login: Krb5Login, alias: str, service: str, host: str, *, key: str = "sasl.jaas.config",
                timeout: float = CHECK_TIMEOUT_S) -> None:
    """Log in as ``login`` and get a ticket for ``service``/``host``, or raise ConfigError naming ``alias.key``."""

    def refuse(why: str) -> ConfigError:
        return ConfigError(ConfigProblem(f"{alias}.{key}", why))

    if login.uses_keytab:
        keytab = Path(str(login.keytab).removeprefix("FILE:"))
        if not keytab.is_file():
            raise refuse(f"keytab {keytab} does not exist")
        if not os.access(keytab, os.R_OK):
            raise refuse(f"keytab {keytab} is not readable by this user")
        held = keytab_principals(keytab)
        if held is None:
            raise refuse(f"keytab {keytab} is not a Kerberos keytab file")
        if login.principal not in held:
            raise refuse(f"keytab {keytab} holds no key of {login.principal} (it holds {', '.join(sorted(held))})")
    try:
        import gssapi  # noqa: F401 - the Python binding of the system's Kerberos
    except ImportError as e:
        raise refuse("sasl.mechanism=GSSAPI needs the gssapi package (make kerberos, or pip install gssapi)") from e
    cache = use_login(login, alias, key)
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            _acquire(login, service, host, cache)
            outcome.append(None)
        except Exception as e:  # reported below, named
            outcome.append(e)

    worker = threading.Thread(target=attempt, name=f"krb5-check-{alias}", daemon=True)
    worker.start()
    worker.join(timeout)
    if not outcome:
        raise refuse(f"no Kerberos KDC answered within {timeout:.0f} s for {login.principal or 'the ticket cache'} "
                     f"(KRB5_CONFIG={os.environ.get('KRB5_CONFIG', '/etc/krb5.conf')})")
    if (error := outcome[0]) is not None:
        raise refuse(f"Kerberos login as {login.principal or 'the ticket cache'} for {service}/{host} failed: "
                     f"{_gss_reason(error)}")
