"""The variants of a workload one bench invocation runs, and the order its runs take.

A variant is a security mode (bench.security: how every tool's clients reach both clusters)
and a transform chain (``--transforms``): ``none``, the raw path, or ``filter``, the chain below
in every replicator's MM2 file, the same for MM2 and mm2py. Workload b holds no tombstones, so
every record goes through each tool's transform path (mm2py: decoded, run through the chain,
re-encoded in the batch's codec) and the target must still equal the source: bench.landed's
exact check stays the verdict, and a tombstone on the source would make it fail (the Filter
drops it, the target misses it). ``require_no_tombstones`` refuses a workload that writes one.

The filter variant runs on plaintext clusters only (its block compares with plaintext's raw
path); the floor reads the source with no replicator, so it runs once per security mode, in the
mode's first variant, and the filter block shows that run beside the tools.

Invariant: ``sequence`` is the one definition of the order of a workload's runs: every tool in
each variant, as one list that the pairs walk forwards and backwards in turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

TRANSFORMS = ("none", "filter")
# the chain of the filter variant, as an MM2 operator writes it (Connect's Filter and predicate),
# each line under the flow's prefix (chain_lines): MM2's dedicated mode keeps of the top-level keys
# only those its connectors declare, so it drops ``transforms.<name>.type`` and refuses the chain
FILTER_CHAIN = (
    "transforms = dropTombstones",
    "transforms.dropTombstones.type = org.apache.kafka.connect.transforms.Filter",
    "transforms.dropTombstones.predicate = isTombstone",
    "predicates = isTombstone",
    "predicates.isTombstone.type = org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
)
# results.md's and the published block's words for what the filter runs ran
FILTER_SETTING = ("Every replicator's MM2 file holds the same chain on its flow (`<source>->tgt.`), "
                  + "; ".join(f"`{line}`" for line in FILTER_CHAIN)
                  + ". The workload writes no tombstone, so every record runs through each tool's transform path "
                    "(mm2py: decoded, run through the chain, re-encoded in the batch's codec) and the target must "
                    "equal the source (verified as for the raw path). The floor has no replicator: its row is the "
                    "plaintext run of the same invocation")


@dataclass(frozen=True)
class Variant:
    """One way a workload runs: ``mode`` (plaintext or tls) and ``transforms`` (none or filter)."""

    mode: str
    transforms: str = "none"


def parse_choices(option: str, noun: str, text: str, choices: Sequence[str]) -> tuple[str, ...]:
    """``option``'s value: a comma-separated list of ``choices`` (each a ``noun``), each once, in the order given."""
    chosen = tuple(t.strip().lower() for t in text.split(",") if t.strip())
    if not chosen:
        raise ValueError(f"{option}: no {noun} in {text!r}; one or more of {', '.join(choices)}")
    for name in chosen:
        if name not in choices:
            raise ValueError(f"{option}: unknown {noun} {name!r}; one or more of {', '.join(choices)}")
        if chosen.count(name) > 1:
            raise ValueError(f"{option}: {noun} {name!r} given twice")
    return chosen


def parse_transforms(text: str) -> tuple[str, ...]:
    """``--transforms``'s value: a comma-separated list of ``TRANSFORMS``, each once, in the order given."""
    return parse_choices("--transforms", "variant", text, TRANSFORMS)


def variant_plan(security: dict[str, tuple[str, ...]], transforms: str, transform_workloads: str | None,
                 shape_too: bool = False) -> dict[str, tuple[Variant, ...]]:
    """Each workload's variants: its security modes (bench.security.security_plan) without a chain,
    then the filter variant on plaintext where ``--transform-workloads`` (None: every workload)
    names it. A ValueError names the option and workload that make no sense."""
    chosen = parse_transforms(transforms)
    if shape_too and "none" not in chosen:
        raise ValueError(f"--transforms {transforms}: workload e (bench.shape) runs without transforms")
    keys = list(security)
    filtered = keys
    if transform_workloads is not None:
        if "filter" not in chosen:
            raise ValueError(f"--transform-workloads {transform_workloads} needs filter in --transforms "
                             f"(given: {transforms})")
        filtered = [k.strip() for k in transform_workloads.split(",") if k.strip()]
        for k in filtered:
            if k not in keys:
                raise ValueError(f"--transform-workloads: workload {k!r} is not among --workloads {','.join(keys)}")
    plan = {}
    for key, modes in security.items():
        variants = [Variant(mode) for mode in modes] if "none" in chosen or key not in filtered else []
        if "filter" in chosen and key in filtered:
            if "plaintext" not in modes:
                raise ValueError(f"workload {key}: --transforms filter runs on plaintext only, and --security "
                                 f"gives it {','.join(modes)}")
            variants.append(Variant("plaintext", "filter"))
        plan[key] = tuple(variants)
    return plan


def sequence(tools: list[str], variants: tuple[Variant, ...]) -> list[tuple[str, Variant]]:
    """Every tool in each variant, in the order a forward pair runs them; the floor only in the
    first variant of each security mode (it has no replicator, so no chain to run)."""
    runs = []
    for i, variant in enumerate(variants):
        first_of_mode = all(v.mode != variant.mode for v in variants[:i])
        runs += [(tool, variant) for tool in tools if tool != "floor" or first_of_mode]
    return runs


def chain_lines(transforms: str, flow: str) -> list[str]:
    """The lines variant ``transforms`` adds to every replicator's MM2 file, on flow ``flow`` (``a->b``)."""
    if transforms == "none":
        return []
    if transforms == "filter":
        return [f"{flow}.{line}" for line in FILTER_CHAIN]
    raise ValueError(f"no transform chain named {transforms!r}; one of {', '.join(TRANSFORMS)}")


def require_no_tombstones(workload: str, values: Sequence[bytes | None]) -> None:
    """Refuse a workload whose values include a tombstone (None): the filter variant's target
    must equal its source, which holds only while the chain drops nothing."""
    if any(value is None for value in values):
        raise ValueError(f"workload {workload}: writes a tombstone, so the filter variant's target could not "
                         "equal its source")
