"""Kerberos logins as MM2 files write them: ``sasl.jaas.config`` with Java's ``Krb5LoginModule``.

``parse_krb5_login`` reads the module's options (``useKeyTab``, ``keyTab``, ``principal``,
``storeKey``, ``useTicketCache``, ...) into a ``Krb5Login``. mm2py logs in either from a keytab
(``useKeyTab=true keyTab="..." principal="..."``) or from the ticket cache a ``kinit`` left
(``useTicketCache=true``, ``KRB5CCNAME``); any other combination is refused with one
``ConfigError`` naming the cluster and key, never guessed at. Parsing does no I/O.
``settings_problem`` is the check ``mm2py.config.clients`` runs on a GSSAPI client's settings;
``mm2py.kafka.krb5conf`` logs in with what ``kerberos_login`` returns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from mm2py.errors import ConfigError, ConfigProblem

KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
# one option: name=value, the value quoted ("...", backslash escapes) or a bare word (true, false)
_OPTION = re.compile(r'\s*(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')
_HEAD = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b")
_BOOLEANS = ("useKeyTab", "storeKey", "useTicketCache", "doNotPrompt", "debug", "refreshKrb5Config",
             "renewTGT", "isInitiator", "useFirstPass", "tryFirstPass", "storePass", "clearPass")
# options that change nothing for a client that logs in without prompting
_HARMLESS = frozenset({"storeKey", "doNotPrompt", "debug", "refreshKrb5Config", "renewTGT", "isInitiator"})
_SUPPORTED = frozenset({"useKeyTab", "keyTab", "principal", "useTicketCache", "ticketCache", *_HARMLESS})


@dataclass(frozen=True)
class Krb5Login:
    """One Kerberos client identity: a principal and where its credentials come from.

    Invariant: with ``keytab`` set, ``principal`` is set too (a keytab login); without it, the
    login uses the ticket cache ``ticket_cache`` (None: the default, ``KRB5CCNAME``).
    """

    principal: str | None
    keytab: str | None = None
    ticket_cache: str | None = None

    @property
    def uses_keytab(self) -> bool:
        return self.keytab is not None


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def jaas_options(jaas: str) -> tuple[str, dict[str, str]] | None:
    """(login module class, options) of a one-module JAAS line; None when it does not read as one."""
    head = _HEAD.match(jaas)
    if head is None:
        return None
    rest, options, pos = jaas[head.end():], {}, 0
    while (option := _OPTION.match(rest, pos)) is not None:
        quoted, bare = option.group(2), option.group(3)
        options[option.group(1)] = _unescape(quoted) if quoted is not None else bare
        pos = option.end()
    if rest[pos:].strip() not in (";", ""):
        return None
    return head.group(1), options


def _true(options: dict[str, str], name: str) -> bool:
    return options.get(name, "false").strip().lower() == "true"


def parse_krb5_login(jaas: str, alias: str, key: str = "sasl.jaas.config") -> Krb5Login:
    """The Kerberos login a ``Krb5LoginModule`` JAAS line asks for; ConfigError naming ``alias.key`` if unsupported."""

    def refuse(why: str) -> ConfigError:
        return ConfigError(ConfigProblem(f"{alias}.{key}", why))

    parsed = jaas_options(jaas)
    if parsed is None:
        raise refuse(f"expected '{KRB5_MODULE} required <option>=<value> ...;' for sasl.mechanism=GSSAPI")
    module, options = parsed
    if module != KRB5_MODULE:
        raise refuse(f"sasl.mechanism=GSSAPI needs {KRB5_MODULE}, not {module}")
    if unknown := sorted(set(options) - _SUPPORTED):
        raise refuse(f"Krb5LoginModule option(s) {', '.join(unknown)} not supported by mm2py "
                     "(it logs in from useKeyTab/keyTab/principal or useTicketCache)")
    for name in _BOOLEANS:
        if name in options and options[name].strip().lower() not in ("true", "false"):
            raise refuse(f"Krb5LoginModule option {name} must be true or false, not {options[name]!r}")
    if "isInitiator" in options and not _true(options, "isInitiator"):
        raise refuse("isInitiator=false makes no client login; drop it")
    principal = options.get("principal") or None
    if _true(options, "useKeyTab"):
        if not options.get("keyTab"):
            raise refuse('useKeyTab=true needs keyTab="<path of the keytab file>"')
        if principal is None:
            raise refuse('useKeyTab=true needs principal="<name>@<REALM>"')
        if _true(options, "useTicketCache"):
            raise refuse("useTicketCache=true together with useKeyTab=true is not supported; choose one")
        return Krb5Login(principal, keytab=options["keyTab"])
    if "keyTab" in options:
        raise refuse("keyTab is set but useKeyTab is not true")
    if _true(options, "useTicketCache"):
        return Krb5Login(principal, ticket_cache=options.get("ticketCache") or None)
    raise refuse("set useKeyTab=true with keyTab and principal (or useTicketCache=true for a kinit's ticket cache)")


GSSAPI = "GSSAPI"


def is_gssapi(props: Mapping[str, str]) -> bool:
    return props.get("sasl.mechanism", "").strip().upper() == GSSAPI


def kerberos_login(props: Mapping[str, str], alias: str) -> Krb5Login:
    """The login a GSSAPI client's settings ask for; ConfigError naming the key when they are incomplete."""
    if not props.get("sasl.kerberos.service.name", "").strip():
        raise ConfigError(ConfigProblem(f"{alias}.sasl.kerberos.service.name",
                                        "sasl.mechanism=GSSAPI needs the brokers' Kerberos service name (kafka)"))
    if "sasl.jaas.config" not in props:
        raise ConfigError(ConfigProblem(f"{alias}.sasl.jaas.config",
                                        "sasl.mechanism=GSSAPI needs sasl.jaas.config with Krb5LoginModule"))
    return parse_krb5_login(props["sasl.jaas.config"], alias)


def settings_problem(props: Mapping[str, str]) -> tuple[str, str] | None:
    """(key without alias, why) when a GSSAPI client's settings cannot run; None when they can (or no GSSAPI)."""
    if not is_gssapi(props):
        return None
    try:
        kerberos_login(props, "")
    except ConfigError as e:
        problem = e.problems[0]
        return (problem.key or "").lstrip("."), problem.message
    return None
