"""Python transforms by dotted path (``RecordTransform``, ``BatchTransform``): imported and built at start,
their returns checked."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from mm2py.transforms.batch import ARROW, PANDAS, BatchLink
from mm2py.transforms.chain import LinkFailed, Record, RecordTransform, Transform, TransformError
from mm2py.transforms.decoded import AvroValues, DecodedBatchLink, SourceRegistry, decoded_transform

# a link's own keys that configure the chain, not the transform (left out of a Python transform's config)
CHAIN_KEYS = ("type", "predicate", "negate")


def python_transform(own: Mapping[str, str], name: str, path: str, registry: SourceRegistry | None = None) -> Transform:
    """The ``RecordTransform`` at ``path``, constructed with the link's keys, its returns checked; a class
    with ``batch_format`` is a ``BatchTransform``, given as its ``BatchLink``; one with ``decoded = True``
    gets Avro values decoded with ``registry``, the flow's source registry (``mm2py.transforms.decoded``;
    refused without one: only a ``schemas.mode = translate`` flow has it)."""
    key = f"transforms.{name}.type"
    module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise TransformError(key, f"{path!r}: not a Python class path (package.module.ClassName)")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except ImportError as e:
        raise TransformError(key, f"{path}: cannot import module {module_name!r}: {e} (mm2py runs Connect's "
                             "Filter, DropHeaders, InsertHeader and Python classes; another Java transform "
                             "needs a Python port)") from None
    except AttributeError:
        raise TransformError(key, f"{path}: module {module_name!r} has no {attr!r}") from None
    except Exception as e:  # a user module failing at import is a configuration problem
        raise TransformError(key, f"{path}: importing module {module_name!r} failed: "
                             f"{type(e).__name__}: {e}") from None
    if not isinstance(cls, type):
        raise TransformError(key, f"{path}: not a class (mm2py.transforms.RecordTransform)")
    config = {k: v for k, v in own.items() if k not in CHAIN_KEYS}
    try:
        instance = cls(config)
    except Exception as e:
        # the keys, not their values: a value may be a secret
        raise TransformError(key, f"{path} built with the keys {sorted(config)} raised "
                             f"{type(e).__name__}: {e}") from None
    kind = getattr(instance, "batch_format", None)
    if kind is not None and kind not in (ARROW, PANDAS):
        raise TransformError(key, f"{path}: batch_format = {kind!r}: {ARROW!r} or {PANDAS!r} "
                             "(mm2py.transforms.BatchTransform)")
    if not callable(instance):
        raise TransformError(key, f"{path}: its instances are not callable as (topic, record) "
                             "(mm2py.transforms.RecordTransform)")
    decoded = getattr(instance, "decoded", False)
    if decoded is not False and decoded is not True:
        raise TransformError(key, f"{path}: decoded = {decoded!r}: True or False (mm2py.transforms.DecodedTransform)")
    if decoded and registry is None:
        raise TransformError(key, f"{path}: decoded = True takes Avro values decoded with the source registry, "
                             "which only a flow with schemas.mode = translate has")
    if decoded and kind not in (None, ARROW):
        raise TransformError(key, f"{path}: decoded = True takes batch_format = {ARROW!r} (values as a struct "
                             "column) or a record transform")
    if decoded and kind is not None:
        assert registry is not None, "refused above"
        return DecodedBatchLink(name, path, instance, kind, AvroValues(registry))
    if kind is not None:
        return BatchLink(name, path, instance, kind)
    if decoded:
        assert registry is not None, "refused above"
        return decoded_transform(name, path, instance, AvroValues(registry))
    return checked(name, path, instance)


def checked(name: str, path: str, transform: RecordTransform) -> Transform:
    def run(topic: str, record: Record) -> Record | None:
        try:
            out = transform(topic, record)
        except Exception as e:
            raise LinkFailed(name, path, f"raised {type(e).__name__}: {e}") from e
        if out is None:
            return None
        if not isinstance(out, Record):
            raise LinkFailed(name, path, f"returned {type(out).__name__}, not a Record or None")
        if not (isinstance(out.key, bytes | None) and isinstance(out.value, bytes | None)
                and isinstance(out.timestamp, int) and isinstance(out.headers, tuple)
                and all(isinstance(h, tuple) and len(h) == 2 and isinstance(h[0], str)
                        and isinstance(h[1], bytes | None) for h in out.headers)):
            raise LinkFailed(name, path, "returned a Record whose key or value is not bytes or None, timestamp "
                             "not an int, or headers not a tuple of (str, bytes or None)")
        return out
    return run
