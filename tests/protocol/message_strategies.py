"""Hypothesis strategies that build random, valid messages of any generated class and version.

They are driven by each class's FIELDS description, so every field of every version is covered
without a hand-written strategy per API.
"""

from __future__ import annotations

import functools
import uuid

from hypothesis import strategies as st

from kbroker.protocol.primitives import FieldSpec
from tests.server.fuzz_frames import INT_RANGES


def _in(rng, version) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


def _primitive(type_name: str):
    if type_name in INT_RANGES:
        lo, hi = INT_RANGES[type_name]
        return st.integers(lo, hi)
    if type_name == "bool":
        return st.booleans()
    if type_name == "float64":
        return st.floats(allow_nan=False)
    if type_name == "string":
        return st.text(max_size=12)
    if type_name == "bytes":
        return st.binary(max_size=16)
    if type_name == "records":
        return st.binary(max_size=32)
    if type_name == "uuid":
        return st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
    raise AssertionError(type_name)


def field_strategy(spec: FieldSpec, version: int, depth: int):
    if spec.struct is not None:
        elem = message_strategy(spec.struct, version, depth + 1)
    else:
        elem = _primitive(spec.type)
    value = st.lists(elem, max_size=3 if depth < 2 else 1) if spec.is_array else elem
    if _in(spec.nullable_versions, version):
        value = st.one_of(st.none(), value)
    return value


@functools.lru_cache(maxsize=None)
def message_strategy(cls, version: int, depth: int = 0):
    """Random instances of ``cls`` holding only fields that ``version`` can carry (one strategy
    object per class, version and depth: Hypothesis keeps what it learns about a strategy on the
    object, so a test drawing from the same one every example skips building it again)."""
    kwargs = {
        spec.attr: field_strategy(spec, version, depth)
        for spec in cls.FIELDS
        if _in(spec.versions, version)
    }
    return st.builds(cls, **kwargs)
