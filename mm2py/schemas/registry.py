"""One cluster's schema registry, through confluent-kafka's client (Confluent's API; Apicurio's
``/apis/ccompat/v7`` speaks it too).

Failures become ``SchemaRegistryError`` naming the cluster and the registry's URL; "not found"
answers become ``None`` / empty lists, for callers to decide what a missing schema means.
Clients are kept per process and settings (``registry_for``): ids never change meaning within a
registry, so the client's id cache stays valid for the life of a worker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from mm2py.errors import SchemaRegistryError

if TYPE_CHECKING:  # the client's package (httpx, authlib, cryptography) is imported at first use:
    # every Python process of a replicator imports the copy path, few of them talk to a registry
    from confluent_kafka.schema_registry import RegisteredSchema, Schema, SchemaReference, SchemaRegistryClient
    from confluent_kafka.schema_registry.common.schema_registry_client import SchemaVersion

T = TypeVar("T")
NOT_FOUND = 404
_kept: dict[tuple[str, tuple[tuple[str, str], ...]], Registry] = {}


def answered(value: T | None, what: str) -> T:
    """``value`` of a registry's answer. The client's types leave every field optional; a registry
    always sends these, so one missing is the registry's error here, never a None passed on."""
    if value is None:
        raise SchemaRegistryError(f"a schema registry answered without {what}")
    return value


def schema_text(schema: Schema) -> str:
    """The text of ``schema`` as a registry answered it."""
    return answered(schema.schema_str, "a schema's text")


def reference_of(ref: SchemaReference) -> tuple[str, int]:
    """The subject and version a schema reference names."""
    return answered(ref.subject, "a reference's subject"), answered(ref.version, "a reference's version")


class Registry:
    """The registry of cluster ``alias``; the constructor does no I/O."""

    def __init__(self, alias: str, settings: Mapping[str, str]):
        self.alias = alias
        self.settings = dict(settings)
        self.url = self.settings.get("url", "")
        self._client: SchemaRegistryClient | None = None

    @property
    def client(self) -> SchemaRegistryClient:
        if self._client is None:
            from confluent_kafka.schema_registry import SchemaRegistryClient

            conf: dict[str, object] = dict(self.settings)
            conf.setdefault("timeout", 30)
            self._client = SchemaRegistryClient(conf)
        return self._client

    def _call(self, what: str, call: Callable[[], T], *, missing: T | None = None, found: bool = False) -> T:
        from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

        try:
            return call()
        except ClientError as e:
            if found and e.http_status_code == NOT_FOUND:
                return missing  # type: ignore[return-value]
            raise SchemaRegistryError(f"schema registry {self.url} refused {what}: HTTP {e.http_status_code} "
                                      f"{e.error_message}", cluster=self.alias, cause=e) from e
        except Exception as e:  # httpx transport errors and kin: the registry did not answer
            raise SchemaRegistryError(f"schema registry {self.url} did not answer {what}: {type(e).__name__}: {e}",
                                      cluster=self.alias, cause=e) from e

    def ping(self) -> None:
        self._call("a listing of subjects", lambda: self.client.get_subjects())

    def schema(self, schema_id: int) -> Schema | None:
        return self._call(f"schema id {schema_id}", lambda: self.client.get_schema(schema_id), found=True)

    def subjects_of(self, schema_id: int) -> list[tuple[str, int]]:
        """(subject, version) pairs registered with ``schema_id``."""
        found: list[SchemaVersion] | None = self._call(
            f"the subjects of schema id {schema_id}", lambda: self.client.get_schema_versions(schema_id),
            found=True)  # None when the registry knows no such id
        return [(answered(v.subject, "a subject"), int(answered(v.version, "a version"))) for v in found or []]

    def versions(self, subject: str) -> list[int]:
        return self._call(f"the versions of subject {subject}", lambda: self.client.get_versions(subject),
                          missing=[], found=True) or []

    def version(self, subject: str, version: int) -> RegisteredSchema:
        return self._call(f"version {version} of subject {subject}", lambda: self.client.get_version(subject, version))

    def register(self, subject: str, schema: Schema) -> int:
        return self._call(f"a schema under subject {subject}", lambda: self.client.register_schema(subject, schema))

    def lookup(self, subject: str, schema: Schema) -> RegisteredSchema | None:
        return self._call(f"a lookup in subject {subject}", lambda: self.client.lookup_schema(subject, schema),
                          found=True)

    def compatibility(self, subject: str) -> str | None:
        return self._call(f"the compatibility of subject {subject}",
                          lambda: self.client.get_compatibility(subject), found=True)

    def set_compatibility(self, subject: str, level: str) -> None:
        self._call(f"compatibility {level} for subject {subject}",
                   lambda: self.client.set_compatibility(subject, level))

    def resolved_references(self, references: list[SchemaReference]) -> list[str]:
        """Texts of every schema ``references`` name, depth first, each after those it names."""
        texts: list[str] = []
        for ref in references:
            named = self.version(*reference_of(ref))
            texts += self.resolved_references(list(named.schema.references or []))
            texts.append(schema_text(named.schema))
        return texts


def registry_for(alias: str, settings: Mapping[str, str]) -> Registry:
    """This process's client of that registry (its caches shared by every task of the worker)."""
    key = (alias, tuple(sorted(settings.items())))
    if key not in _kept:
        _kept[key] = Registry(alias, settings)
    return _kept[key]
