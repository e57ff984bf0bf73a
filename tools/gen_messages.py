#!/usr/bin/env python3
"""Generate kbroker/protocol/messages/ from Apache Kafka's official JSON schemas.

The schemas are read from Kafka's own jars at the version and checksums pinned in
``schemas/pin.json`` (tools/kafka_schemas.py downloads them once into a cache and verifies them on
every use; nothing is copied into the repo). To try another Kafka release, change the pin. The
output is one module per API (request and response classes), a ``headers`` module, one module per
``data`` schema and per coordinator record key or value, and ``__init__.py`` with the registry of
API keys, the header-version rules, the other schemas, and the advertised version ranges from
``schemas/manifest.json``. Every module names the jar and schema it comes from.

The output is deterministic; ``tests/protocol/test_generated_up_to_date.py`` fails if running this
again changes the committed files (``--check``, which downloads the jars first if missing).

Semantics follow Kafka's own generator: fields absent from a version take their defaults; encoding
a non-default value into a version that cannot carry it raises EncodeError unless the field is
``ignorable``; tagged fields are written only when they differ from their defaults; unknown tags
are kept on decode and written back. A schema whose validVersions is "none" (an API Kafka removed,
such as LeaderAndIsr) generates nothing.

    python tools/gen_messages.py [--out DIR] [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kafka_schemas  # noqa: E402  (tools/kafka_schemas.py)

REPO = Path(__file__).resolve().parent.parent
MAX_VERSION = 0x7FFF
FIXED = {  # type -> (struct format char, size)
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
}
PRIMITIVES = set(FIXED) | {"string", "bytes", "records", "uuid"}


# --- schema loading ----------------------------------------------------------------------------

def strip_comments(text: str) -> str:
    """Remove // comments outside of strings (the schemas are JSON with comments)."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class Source:
    """One schema: its JSON text, its file name, and where it comes from: the jar entry (such as
    ``kafka-clients-4.4.0.jar!/common/message/ProduceRequest.json``) and the jar's artifact."""
    name: str
    origin: str
    jar: str
    text: str


def pinned_version() -> str:
    return json.loads(kafka_schemas.PIN.read_text())["version"]


def pinned_sources() -> list[Source]:
    try:
        schemas = kafka_schemas.pinned_schemas()
    except kafka_schemas.SchemaSourceError as exc:
        sys.exit(f"gen_messages: {exc}")
    return [Source(s.name, s.origin, s.jar.artifact, s.text) for s in schemas]


# --- model -------------------------------------------------------------------------------------

def parse_versions(spec) -> tuple[int, int] | None:
    if spec is None:
        return None
    spec = str(spec).strip()
    if spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo), int(hi)
    return int(spec), int(spec)


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


@dataclass
class Field:
    name: str
    attr: str
    type: str  # element type for arrays
    is_array: bool
    versions: tuple[int, int]
    nullable: tuple[int, int] | None
    tagged: tuple[int, int] | None
    tag: int | None
    default: object
    ignorable: bool
    never_flexible: bool
    struct: "Struct | None" = None

    @property
    def is_struct(self):
        return self.struct is not None


@dataclass
class Struct:
    name: str
    class_name: str
    qualname: str
    fields: list[Field] = field(default_factory=list)
    # The versions in which the message can contain this struct (for a struct used in several
    # places, the smallest range holding them all); the generated code is simplified for them.
    versions: tuple[int, int] | None = None


@dataclass
class Message:
    name: str
    kind: str
    api_key: int | None
    valid: tuple[int, int]
    flexible: tuple[int, int] | None
    root: Struct
    structs: list[Struct]
    source: str  # the schema's file name, e.g. ProduceRequest.json
    origin: str  # the jar entry it comes from, e.g. kafka-clients-4.4.0.jar!/common/message/...
    jar: str  # the artifact holding it, e.g. kafka-group-coordinator


def build_message(schema: dict, source: Source) -> Message:
    name = schema["name"]
    valid = parse_versions(schema["validVersions"])
    if schema["type"] == "header":
        valid = (0, valid[1])  # header v0 (no client id) still exists on the wire
    flexible = parse_versions(schema.get("flexibleVersions", "none"))
    structs: list[Struct] = []
    common = {s["name"]: s for s in schema.get("commonStructs", [])}
    made: dict[str, Struct] = {}

    def make_struct(sname, fields_json, root=False):
        if sname in made:
            return made[sname]
        cls = name if root else f"_{name}_{sname}"
        st = Struct(sname, cls, name if root else f"{name}.{sname}")
        made[sname] = st
        for fj in fields_json:
            st.fields.append(make_field(fj))
        structs.append(st)
        return st

    def make_field(fj):
        ftype = fj["type"]
        is_array = ftype.startswith("[]")
        elem = ftype[2:] if is_array else ftype
        struct = None
        if elem not in PRIMITIVES:
            if "fields" in fj:
                struct = make_struct(elem, fj["fields"])
            elif elem in common:
                struct = make_struct(elem, common[elem]["fields"])
            elif elem in made:
                struct = made[elem]
            else:
                raise SystemExit(f"{source.origin}: unknown type {ftype}")
        return Field(
            name=fj["name"],
            attr=snake(fj["name"]),
            type=elem,
            is_array=is_array,
            # As in Kafka's generator, a field without "versions" takes its "taggedVersions".
            versions=parse_versions(fj.get("versions", fj.get("taggedVersions"))),
            nullable=parse_versions(fj.get("nullableVersions")),
            tagged=parse_versions(fj.get("taggedVersions")),
            tag=fj.get("tag"),
            default=fj.get("default"),
            ignorable=bool(fj.get("ignorable", False)),
            never_flexible=fj.get("flexibleVersions") == "none",
            struct=struct,
        )

    root = make_struct(name, schema["fields"], root=True)

    def reach(st: Struct, versions: tuple[int, int]):
        if st.versions is not None:
            hull = (min(st.versions[0], versions[0]), max(st.versions[1], versions[1]))
            if hull == st.versions:
                return
            versions = hull
        st.versions = versions
        for f in st.fields:
            if f.struct is not None and f.versions is not None:
                lo, hi = max(f.versions[0], versions[0]), min(f.versions[1], versions[1])
                if lo <= hi:
                    reach(f.struct, (lo, hi))

    reach(root, valid)
    return Message(name, schema["type"], schema.get("apiKey"), valid, flexible, root,
                   structs, source.name, source.origin, source.jar)


# --- code generation ---------------------------------------------------------------------------
#
# Every emitted line knows the versions that can reach it (`ctx`, a (lo, hi) range): the valid
# versions, narrowed by each enclosing `if` on the version, on `flexible` or on a tag. Conditions
# are simplified against that range, so no test is repeated inside a block that already decided
# it, and a branch no version can take is not emitted at all.

Range = tuple[int, int]


def intersect(rng: Range | None, ctx: Range) -> Range | None:
    """The versions of ctx inside rng, or None when there are none."""
    if rng is None:
        return None
    lo, hi = max(rng[0], ctx[0]), min(rng[1], ctx[1])
    return (lo, hi) if lo <= hi else None


def outside(rng: Range | None, ctx: Range) -> Range | None:
    """The versions of ctx outside rng (None when there are none). When they form two runs (rng
    is a hole in the middle of ctx) the answer is ctx itself: a safe superset."""
    inner = intersect(rng, ctx)
    if inner is None:
        return ctx
    if inner == ctx:
        return None
    if inner[0] == ctx[0]:
        return (inner[1] + 1, ctx[1])
    if inner[1] == ctx[1]:
        return (ctx[0], inner[0] - 1)
    return ctx


def cond(rng: Range | None, ctx: Range) -> str | None:
    """Python condition on `version` for rng within ctx; None = always, "False" = never."""
    inner = intersect(rng, ctx)
    if inner is None:
        return "False"
    lo, hi = inner
    if lo > ctx[0] and hi < ctx[1]:
        return f"version == {lo}" if lo == hi else f"{lo} <= version <= {hi}"
    if lo > ctx[0]:
        return f"version >= {lo}"
    if hi < ctx[1]:
        return f"version <= {hi}"
    return None


def cond_not(rng: Range | None, ctx: Range) -> str | None:
    """Python condition on `version` for the versions of ctx outside rng; None = always."""
    inner = intersect(rng, ctx)
    if inner is None:
        return None
    if inner == ctx:
        return "False"
    lo, hi = inner
    if lo == ctx[0]:
        return f"version > {hi}"
    if hi == ctx[1]:
        return f"version < {lo}"
    return f"not ({lo} <= version <= {hi})"


def flexible_in(msg: Message, f: Field | None, ctx: Range) -> bool | None:
    """Whether every version of ctx uses the compact (flexible) encoding for f (True), none does
    (False), or it varies and the code must test `flexible` at run time (None)."""
    if msg.flexible is None or (f is not None and f.never_flexible):
        return False
    inner = intersect(msg.flexible, ctx)
    if inner is None:
        return False
    return True if inner == ctx else None


def default_expr(f: Field, valid) -> str:
    d = f.default
    if f.is_array:
        return "None" if d == "null" else "[]"
    if f.is_struct:
        return "None" if f.nullable and d == "null" else f"{f.struct.class_name}()"
    if d == "null":
        return "None"
    t = f.type
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return "0" if d in (None, "") else str(int(str(d), 0))
    if t == "float64":
        return repr(float(d)) if d not in (None, "") else "0.0"
    if t == "bool":
        return "True" if str(d).lower() == "true" else "False"
    if t == "string":
        return repr(d) if d not in (None,) else "''"
    if t == "bytes":
        return "b''"
    if t == "records":
        return "None"
    if t == "uuid":
        return "ZERO_UUID"
    raise SystemExit(f"no default for {f.name}: {t}")


def differs(value: str, default: str) -> str:
    """Python condition: value is not the default (identity for None, equality otherwise)."""
    return f"{value} is not None" if default == "None" else f"{value} != {default}"


class Emitter:
    def __init__(self):
        self.lines: list[str] = []
        self.formats: dict[str, str] = {}

    def fmt(self, chars: str) -> str:
        if chars not in self.formats:
            self.formats[chars] = "_S_" + chars.replace("?", "x")
        return self.formats[chars]

    def emit(self, indent: int, line: str = ""):
        self.lines.append(("    " * indent + line) if line else "")

    def by_flexible(self, ind: int, state: bool | None, flex_line: str, plain_line: str):
        """One line for the compact encoding and one for the classic, chosen by `flexible` at
        run time only when the versions reaching this code have both."""
        if state is None:
            self.emit(ind, "if flexible:")
            self.emit(ind + 1, flex_line)
            self.emit(ind, "else:")
            self.emit(ind + 1, plain_line)
        else:
            self.emit(ind, flex_line if state else plain_line)


def element_of(f: Field) -> Field:
    """The element of an array of primitives, as a non-nullable field of its own."""
    return Field(f.name, f.attr, f.type, False, f.versions, None, None, None, None, False,
                 f.never_flexible)


def null_error(f: Field) -> str:
    return f"raise EncodeError('{f.name} cannot be null in version %d' % version)"


def gen_read_value(em: Emitter, ind: int, f: Field, target: str, ctx: Range, msg: Message):
    """Emit code reading one value of field f into `target`, for the versions in ctx."""
    nc = cond(f.nullable, ctx)  # None: always nullable here; "False": never

    if f.is_array:
        nullable_arg = "True" if nc is None else nc
        em.by_flexible(ind, flexible_in(msg, f, ctx),
                       f"n, pos = read_compact_array_length(buf, pos, {nullable_arg})",
                       f"n, pos = read_array_length(buf, pos, {nullable_arg})")
        at = ind
        if nc != "False":  # the length readers refuse -1 where the field is not nullable
            em.emit(ind, "if n < 0:")
            em.emit(ind + 1, f"{target} = None")
            em.emit(ind, "else:")
            at = ind + 1
        if f.struct:
            em.emit(at, "items = []")
            em.emit(at, "append = items.append")
            em.emit(at, f"reader = {f.struct.class_name}._read")
            em.emit(at, "for _ in range(n):")
            em.emit(at + 1, "item, pos = reader(buf, pos, version)")
            em.emit(at + 1, "append(item)")
            em.emit(at, f"{target} = items")
        elif f.type in FIXED:
            ch, size = FIXED[f.type]
            em.emit(at, f"check_fixed_array(buf, pos, n, {size})")
            em.emit(at, f"{target} = list(struct.unpack_from('>%d{ch}' % n, buf, pos))")
            em.emit(at, f"pos += n * {size}")
        else:
            em.emit(at, "items = []")
            em.emit(at, "for _ in range(n):")
            gen_read_value(em, at + 1, element_of(f), "item", ctx, msg)
            em.emit(at + 1, "items.append(item)")
            em.emit(at, f"{target} = items")
        return
    if f.is_struct:
        # A nullable struct carries its presence byte in every version (as Kafka writes it).
        if f.nullable:
            em.emit(ind, "(present,) = _S_b.unpack_from(buf, pos)")
            em.emit(ind, "pos += 1")
            em.emit(ind, "if present < 0:")
            em.emit(ind + 1, f"{target} = None")
            em.emit(ind, "else:")
            em.emit(ind + 1, f"{target}, pos = {f.struct.class_name}._read(buf, pos, version)")
        else:
            em.emit(ind, f"{target}, pos = {f.struct.class_name}._read(buf, pos, version)")
        return
    t = f.type
    if t in FIXED:
        ch, size = FIXED[t]
        em.emit(ind, f"({target},) = {em.fmt(ch)}.unpack_from(buf, pos)")
        em.emit(ind, f"pos += {size}")
        return
    if t == "uuid":
        em.emit(ind, f"{target}, pos = read_uuid(buf, pos)")
        return
    plain, plain_null, flex, flex_null = {
        "string": ("read_string", "read_nullable_string", "read_compact_string",
                   "read_compact_nullable_string"),
        "bytes": ("read_bytes", "read_nullable_bytes", "read_compact_bytes",
                  "read_compact_nullable_bytes"),
        "records": ("read_records", "read_records", "read_compact_records",
                    "read_compact_records"),
    }[t]

    def read(at, versions, fn_plain, fn_flex):
        em.by_flexible(at, flexible_in(msg, f, versions),
                       f"{target}, pos = {fn_flex}(buf, pos)",
                       f"{target}, pos = {fn_plain}(buf, pos)")

    if nc == "False":
        read(ind, ctx, plain, flex)
    elif nc is None:
        read(ind, ctx, plain_null, flex_null)
    else:
        em.emit(ind, f"if {nc}:")
        read(ind + 1, intersect(f.nullable, ctx), plain_null, flex_null)
        em.emit(ind, "else:")
        read(ind + 1, outside(f.nullable, ctx), plain, flex)


def gen_write_value(em: Emitter, ind: int, f: Field, value: str, out: str, ctx: Range,
                    msg: Message):
    """Emit code writing `value` of field f to `out`, for the versions in ctx. Writing None into
    a version where the field is not nullable is an EncodeError."""
    nc = cond(f.nullable, ctx)
    flexible = flexible_in(msg, f, ctx)

    def refuse_null(at):
        # Only versions where the field is nullable may reach the line after this.
        if nc == "False":
            em.emit(at, null_error(f))
        elif nc is not None:
            em.emit(at, f"if {cond_not(f.nullable, ctx)}:")
            em.emit(at + 1, null_error(f))

    if f.is_array:
        at = ind
        em.emit(ind, f"if {value} is None:")
        refuse_null(ind + 1)
        if nc != "False":
            null = {True: "b'\\x00'", False: "b'\\xff\\xff\\xff\\xff'",
                    None: "b'\\x00' if flexible else b'\\xff\\xff\\xff\\xff'"}
            em.emit(ind + 1, f"{out} += {null[flexible_in(msg, f, intersect(f.nullable, ctx))]}")
            em.emit(ind, "else:")
            at = ind + 1
        em.by_flexible(at, flexible, f"write_uvarint({out}, len({value}) + 1)",
                       f"{out} += _S_i.pack(len({value}))")
        if f.struct:
            em.emit(at, f"for item in {value}:")
            em.emit(at + 1, f"item._write({out}, version, splices)")
        elif f.type in FIXED:
            ch, _ = FIXED[f.type]
            em.emit(at, f"{out} += struct.pack('>%d{ch}' % len({value}), *{value})")
        else:
            em.emit(at, f"for item in {value}:")
            gen_write_value(em, at + 1, element_of(f), "item", out, ctx, msg)
        return
    if f.is_struct:
        if f.nullable:
            # The presence byte is written in every version, as gen_read_value reads it.
            em.emit(ind, f"if {value} is None:")
            refuse_null(ind + 1)
            if nc != "False":
                em.emit(ind + 1, f"{out} += b'\\xff'")
                em.emit(ind, "else:")
                em.emit(ind + 1, f"{out} += b'\\x01'")
                em.emit(ind + 1, f"{value}._write({out}, version, splices)")
            else:
                em.emit(ind, f"{out} += b'\\x01'")
                em.emit(ind, f"{value}._write({out}, version, splices)")
        else:
            em.emit(ind, f"{value}._write({out}, version, splices)")
        return
    t = f.type
    if t in FIXED:
        ch, _ = FIXED[t]
        em.emit(ind, f"{out} += {em.fmt(ch)}.pack({value})")
        return
    if t == "uuid":
        em.emit(ind, f"{out} += {value}.bytes")
        return
    if t == "records":
        compact = "flexible" if flexible is None else str(flexible)
        em.emit(ind, f"write_records({out}, {value}, splices, {compact})")
        return
    base = {"string": "string", "bytes": "bytes"}[t]
    if nc == "False":
        em.emit(ind, f"if {value} is None:")
        em.emit(ind + 1, null_error(f))
        plain, compact = f"write_{base}", f"write_compact_{base}"
    else:
        if nc is not None:
            em.emit(ind, f"if {value} is None and {cond_not(f.nullable, ctx)}:")
            em.emit(ind + 1, null_error(f))
        plain, compact = f"write_nullable_{base}", f"write_compact_nullable_{base}"
    em.by_flexible(ind, flexible, f"{compact}({out}, {value})", f"{plain}({out}, {value})")


def is_tagged_only(f: Field, valid) -> bool:
    """True when, in every valid version that has the field, it is a tagged field."""
    if f.tagged is None:
        return False
    lo = max(f.versions[0], valid[0])
    hi = min(f.versions[1], valid[1])
    return f.tagged[0] <= lo and f.tagged[1] >= hi


def field_groups(st: Struct, valid):
    """Split a struct's fields into runs; consecutive fixed-width fields present in the same
    versions are read and written with one struct format. Each run is
    [kind, present (a cond on valid), fields, the versions that have them, tagged_always]."""
    groups = []
    for f in st.fields:
        present = cond(f.versions, valid)
        tagged_always = is_tagged_only(f, valid)
        is_fixed = (f.type in FIXED and not f.is_array and f.tagged is None
                    and present != "False")
        if (is_fixed and groups and groups[-1][0] == "fixed" and groups[-1][1] == present):
            groups[-1][2].append(f)
        elif is_fixed:
            groups.append(["fixed", present, [f], intersect(f.versions, valid), False])
        else:
            groups.append(["single", present, [f], intersect(f.versions, valid),
                           tagged_always])
    return groups


def checked_regular_versions(f: Field, versions: Range, msg: Message) -> Range:
    """The versions in which a field that is tagged in some versions is a regular field."""
    regular = outside(f.tagged, versions)
    if regular == versions and intersect(f.tagged, versions) is not None:
        raise SystemExit(f"{msg.source}: {f.name} is tagged in versions inside its regular ones")
    return regular


def gen_struct(em: Emitter, st: Struct, msg: Message):
    valid = st.versions or msg.valid
    flex_state = flexible_in(msg, None, valid)
    tags_ctx = intersect(msg.flexible, valid)  # the versions that have a tag section
    attrs = [f.attr for f in st.fields]
    # Tagged fields that some flexible version carries; any other tag is kept as unknown.
    tagged_fields = [f for f in st.fields
                     if tags_ctx is not None and intersect(f.tagged, tags_ctx) is not None]
    em.emit(0, f"class {st.class_name}:")
    if st.class_name != st.qualname:
        em.emit(1, f'"""{st.qualname} (struct of {msg.name})."""')
        em.emit(0)
        em.emit(1, f"__qualname__ = {st.qualname!r}")
    else:
        em.emit(1, f'"""{st.name}: generated from {msg.source}."""')
        em.emit(0)
    em.emit(1, f"__slots__ = {tuple(attrs + ['unknown_tagged_fields'])!r}")
    em.emit(1, f"FIELD_NAMES = {tuple(attrs)!r}")
    em.emit(0)
    # __init__
    params = ", ".join(f"{f.attr}=_UNSET" for f in st.fields)
    em.emit(1, f"def __init__(self{', *, ' + params if params else ''}, unknown_tagged_fields=None):")
    for f in st.fields:
        em.emit(2, f"self.{f.attr} = {default_expr(f, valid)} if {f.attr} is _UNSET else {f.attr}")
    em.emit(2, "self.unknown_tagged_fields = unknown_tagged_fields")
    em.emit(0)

    def tag_section(emit_body):
        """The tag section exists in flexible versions only; test `flexible` when that varies."""
        if tags_ctx is None:
            return
        if flex_state is None:
            em.emit(2, "if flexible:")
            emit_body(3)
        else:
            emit_body(2)

    # _read
    em.emit(1, "@staticmethod")
    em.emit(1, "def _read(buf, pos, version):")
    em.emit(2, f"self = {st.class_name}.__new__({st.class_name})")
    if flex_state is None:
        em.emit(2, f"flexible = {cond(msg.flexible, valid)}")
    for kind, present, fields, versions, tagged_always in field_groups(st, valid):
        if present == "False":
            for f in fields:
                em.emit(2, f"self.{f.attr} = {default_expr(f, valid)}")
            continue
        if tagged_always:
            # Always tagged in the valid versions: only the default here, set by the tag section.
            f = fields[0]
            em.emit(2, f"self.{f.attr} = {default_expr(f, valid)}")
            continue
        ind = 2
        if present is not None:
            em.emit(2, f"if {present}:")
            ind = 3
        if kind == "fixed":
            chars = "".join(FIXED[f.type][0] for f in fields)
            size = sum(FIXED[f.type][1] for f in fields)
            targets = ", ".join(f"self.{f.attr}" for f in fields)
            if len(fields) == 1:
                targets += ","
            em.emit(ind, f"({targets}) = {em.fmt(chars)}.unpack_from(buf, pos)")
            em.emit(ind, f"pos += {size}")
        else:
            f = fields[0]
            regular = checked_regular_versions(f, versions, msg)
            if regular != versions:
                # Tagged in some versions (read from the tag section), a regular field in others.
                em.emit(ind, f"if {cond(f.tagged, versions)}:")
                em.emit(ind + 1, f"self.{f.attr} = {default_expr(f, valid)}")
                em.emit(ind, "else:")
                gen_read_value(em, ind + 1, f, f"self.{f.attr}", regular, msg)
            else:
                gen_read_value(em, ind, f, f"self.{f.attr}", versions, msg)
        if present is not None:
            em.emit(2, "else:")
            for f in fields:
                em.emit(3, f"self.{f.attr} = {default_expr(f, valid)}")

    def read_tags(ind):
        if not tagged_fields:
            em.emit(ind, "self.unknown_tagged_fields, pos = read_unknown_tags(buf, pos)")
            return
        if flex_state is True:
            em.emit(ind, "self.unknown_tagged_fields = None")
        em.emit(ind, "n_tags, pos = read_tag_count(buf, pos)")
        em.emit(ind, "for _ in range(n_tags):")
        em.emit(ind + 1, "tag, size, pos = read_tag_header(buf, pos)")
        em.emit(ind + 1, "end = pos + size")
        first = True
        for f in tagged_fields:
            tc = cond(f.tagged, tags_ctx)
            em.emit(ind + 1, f"{'if' if first else 'elif'} tag == {f.tag}"
                             f"{f' and {tc}' if tc else ''}:")
            first = False
            if f.is_struct and f.nullable and not f.is_array:
                # A tagged nullable struct's presence is an unsigned varint: 0 null, 1 present
                # (Kafka's generator), not the int8 of a regular field.
                em.emit(ind + 2, "present, pos = read_uvarint(buf, pos)")
                em.emit(ind + 2, "if present == 0:")
                em.emit(ind + 3, f"self.{f.attr} = None")
                em.emit(ind + 2, "else:")
                em.emit(ind + 3, f"self.{f.attr}, pos = {f.struct.class_name}._read(buf, pos, "
                                 f"version)")
            else:
                gen_read_value(em, ind + 2, f, f"self.{f.attr}", intersect(f.tagged, tags_ctx),
                               msg)
            em.emit(ind + 2, "if pos != end:")
            em.emit(ind + 3, f"raise DecodeError('tagged field {f.name} has the wrong size')")
        em.emit(ind + 1, "else:")
        em.emit(ind + 2, "if self.unknown_tagged_fields is None:")
        em.emit(ind + 3, "self.unknown_tagged_fields = []")
        em.emit(ind + 2, "self.unknown_tagged_fields.append((tag, bytes(buf[pos:end])))")
        em.emit(ind + 2, "pos = end")

    if flex_state is True:
        read_tags(2)
    else:
        em.emit(2, "self.unknown_tagged_fields = None")
        tag_section(read_tags)
    em.emit(2, "return self, pos")
    em.emit(0)
    # _write
    em.emit(1, "def _write(self, out, version, splices):")
    if flex_state is None:
        em.emit(2, f"flexible = {cond(msg.flexible, valid)}")
    for kind, present, fields, versions, tagged_always in field_groups(st, valid):
        if tagged_always:
            continue
        if present == "False":
            for f in fields:
                gen_absent_check(em, 2, f, valid)
            continue
        ind = 2
        if present is not None:
            em.emit(2, f"if {present}:")
            ind = 3
        if kind == "fixed":
            chars = "".join(FIXED[f.type][0] for f in fields)
            values = ", ".join(f"self.{f.attr}" for f in fields)
            em.emit(ind, f"out += {em.fmt(chars)}.pack({values})")
        else:
            f = fields[0]
            regular = checked_regular_versions(f, versions, msg)
            if regular != versions:
                # Written by the tag section in the versions where it is tagged.
                em.emit(ind, f"if {cond_not(f.tagged, versions)}:")
                gen_write_value(em, ind + 1, f, f"self.{f.attr}", "out", regular, msg)
            else:
                gen_write_value(em, ind, f, f"self.{f.attr}", "out", versions, msg)
        if present is not None:
            absent = [f for f in fields if not f.ignorable]
            if len(absent) == 1:
                gen_absent_check(em, 2, absent[0], valid, "elif")
            elif absent:
                em.emit(2, "else:")
                for f in absent:
                    gen_absent_check(em, 3, f, valid)
    for f in st.fields:
        if f.tagged is None or f.ignorable or not is_tagged_only(f, valid):
            continue
        tc = cond_not(f.tagged, valid)
        if tc != "False":
            # A tagged field that this version cannot carry must hold its default.
            d = differs(f"self.{f.attr}", default_expr(f, valid))
            em.emit(2, f"if {d}:" if tc is None else f"if {tc} and {d}:")
            em.emit(3, f"raise EncodeError('{f.name} is not supported in version %d' % version)")

    def write_tags(ind):
        if not tagged_fields:
            em.emit(ind, "write_unknown_tags(out, self.unknown_tagged_fields)")
            return
        em.emit(ind, "tagged = list(self.unknown_tagged_fields or ())")
        for f in tagged_fields:
            tc = cond(f.tagged, tags_ctx)
            c = differs(f"self.{f.attr}", default_expr(f, valid))
            em.emit(ind, f"if {tc} and {c}:" if tc else f"if {c}:")
            em.emit(ind + 1, "field_out = bytearray()")
            if f.is_struct and f.nullable and not f.is_array:  # varint presence, as read above
                em.emit(ind + 1, f"if self.{f.attr} is None:")
                em.emit(ind + 2, "field_out += b'\\x00'")
                em.emit(ind + 1, "else:")
                em.emit(ind + 2, "field_out += b'\\x01'")
                em.emit(ind + 2, f"self.{f.attr}._write(field_out, version, splices)")
            else:
                gen_write_value(em, ind + 1, f, f"self.{f.attr}", "field_out",
                                intersect(f.tagged, tags_ctx), msg)
            em.emit(ind + 1, f"tagged.append(({f.tag}, field_out))")
        em.emit(ind, "write_tagged_fields(out, tagged)")

    tag_section(write_tags)
    em.emit(0)
    # equality and repr
    em.emit(1, "def __eq__(self, other):")
    em.emit(2, "if other.__class__ is not self.__class__:")
    em.emit(3, "return NotImplemented")
    cmp = " and ".join(f"self.{a} == other.{a}" for a in attrs) or "True"
    em.emit(2, f"return {cmp}")
    em.emit(0)
    em.emit(1, "__hash__ = None")
    em.emit(0)
    em.emit(1, "def __repr__(self):")
    em.emit(2, "return _repr(self)")
    em.emit(0)
    em.emit(0)


def gen_absent_check(em: Emitter, ind: int, f: Field, valid, keyword: str = "if"):
    """A field this version cannot carry must hold its default, unless it is ignorable."""
    if f.ignorable:
        return
    em.emit(ind, f"{keyword} {differs(f'self.{f.attr}', default_expr(f, valid))}:")
    em.emit(ind + 1, f"raise EncodeError('{f.name} is not supported in version %d' % version)")


def gen_spec(em: Emitter, st: Struct, msg: Message):
    """FIELDS: a description of every field, for tests and tools (e.g. random message builders)."""
    items = []
    for f in st.fields:
        struct_ref = f.struct.class_name if f.struct else "None"
        items.append(
            f"    FieldSpec({f.attr!r}, {f.type!r}, {f.is_array}, {f.versions}, "
            f"{f.nullable}, {f.tagged}, {f.tag}, {f.ignorable}, {struct_ref}),"
        )
    em.emit(0, f"{st.class_name}.FIELDS = (")
    em.lines.extend(items)
    em.emit(0, ")")


def gen_message_class_api(em: Emitter, msg: Message):
    st = msg.root
    em.emit(0, f"{st.class_name}.API_KEY = {msg.api_key}")
    em.emit(0, f"{st.class_name}.MESSAGE_TYPE = {msg.kind!r}")
    em.emit(0, f"{st.class_name}.VALID_VERSIONS = {msg.valid}")
    em.emit(0, f"{st.class_name}.FLEXIBLE_VERSION = "
               f"{msg.flexible[0] if msg.flexible else None}")
    for other in msg.structs:
        if other is not st:
            em.emit(0, f"{st.class_name}.{other.name} = {other.class_name}")
    em.emit(0, f"{st.class_name}.decode = classmethod(_decode)")
    em.emit(0, f"{st.class_name}.read = classmethod(_read_at)")
    em.emit(0, f"{st.class_name}.encode = _encode")
    em.emit(0, f"{st.class_name}.to_bytes = _to_bytes")


HEADER = '''\
# GENERATED by tools/gen_messages.py from Apache Kafka's schemas:
{sources}
# Do not edit by hand: change the generator or the pin (schemas/pin.json), then `make regenerate`.
"""{doc}"""

import struct

from kbroker.protocol.primitives import *  # noqa: F401,F403
from kbroker.protocol.primitives import _UNSET, _decode, _encode, _read_at, _repr, _to_bytes
'''


def render_module(messages: list[Message], doc: str) -> str:
    em = Emitter()
    for msg in messages:
        for st in msg.structs:  # nested structs come first (built depth-first), the root last
            gen_struct(em, st, msg)
        for st in msg.structs:
            gen_spec(em, st, msg)
        gen_message_class_api(em, msg)
        em.emit(0)
        em.emit(0)
    formats = "".join(f"{var} = struct.Struct('>{chars}')\n"
                      for chars, var in sorted(em.formats.items()))
    formats += "".join(f"_S_{c} = struct.Struct('>{c}')\n" for c in ("b", "i")
                       if c not in em.formats)
    sources = "\n".join(f"#   {m.origin}" for m in messages)
    body = "\n".join(em.lines).rstrip() + "\n"
    return HEADER.format(sources=sources, doc=doc) + "\n" + formats + "\n\n" + body


# --- module layout -----------------------------------------------------------------------------

def module_name_for(msg_name: str, kind: str) -> str:
    if kind == "header":
        return "headers"
    if kind in ("request", "response"):
        return snake(re.sub(r"(Request|Response)$", "", msg_name))
    return snake(msg_name)


def key_label(msg: Message) -> str:
    """Internal log records ("coordinator-key"/"coordinator-value") use apiKey as the record type,
    written on disk as the int16 version prefix of the record key; they are not APIs and stay out
    of the registry."""
    return "record type" if msg.kind.startswith("coordinator-") else "api key"


def generate(sources: list[Source]) -> dict[str, str]:
    """Returns {relative file name: content}."""
    messages: dict[str, list[Message]] = {}
    seen: dict[str, str] = {}
    for source in sources:
        schema = json.loads(strip_comments(source.text))
        name = schema["name"]
        if name in seen:
            raise SystemExit(f"{source.origin}: {name} is also defined in {seen[name]}")
        seen[name] = source.origin
        if parse_versions(schema["validVersions"]) is None:
            continue  # an API Kafka removed (validVersions "none"): nothing to generate
        msg = build_message(schema, source)
        module = messages.setdefault(module_name_for(name, msg.kind), [])
        if module and sorted(m.kind for m in module + [msg]) not in (
                ["request", "response"], ["header", "header"]):
            raise SystemExit(f"{source.origin}: {name} would share module "
                             f"{module_name_for(name, msg.kind)} with {module[0].name}")
        module.append(msg)

    files: dict[str, str] = {}
    apis: dict[int, dict] = {}
    others: list[tuple[Message, str]] = []
    for module, msgs in sorted(messages.items()):
        msgs.sort(key=lambda m: (m.kind != "request", m.kind != "header", m.name))
        doc = "; ".join(
            f"{m.name} ({key_label(m)} {m.api_key}, versions {m.valid[0]}-{m.valid[1]})"
            if m.api_key is not None else f"{m.name} (versions {m.valid[0]}-{m.valid[1]})"
            for m in msgs)
        files[f"{module}.py"] = render_module(msgs, doc)
        for m in msgs:
            if m.kind in ("request", "response"):
                entry = apis.setdefault(m.api_key, {"module": module})
                entry[m.kind] = m.name
                entry[f"{m.kind}_valid"] = m.valid
                entry[f"{m.kind}_flexible"] = m.flexible[0] if m.flexible else None
            elif m.kind != "header":
                others.append((m, module))
    files["__init__.py"] = render_registry(apis, others)
    return files


def coordinator_of(jar: str) -> str:
    """kafka-group-coordinator -> group"""
    return jar.removeprefix("kafka-").removesuffix("-coordinator")


def render_others(others: list[tuple[Message, str]]) -> list[str]:
    """SCHEMAS (every generated class that is not an API message) and COORDINATOR_RECORDS (each
    coordinator's record types, pairing a key schema with the value schema of its type)."""
    lines = ["SCHEMAS = {"]
    records: dict[str, dict[int, dict[str, str]]] = {}
    for m, module in sorted(others, key=lambda item: item[0].name):
        record_type = m.api_key if m.kind.startswith("coordinator-") else None
        lines.append(f"    {m.name!r}: SchemaInfo({module!r}, {m.kind!r}, {record_type}, "
                     f"{m.valid}, {m.jar!r}),")
        if record_type is not None:
            pair = records.setdefault(coordinator_of(m.jar), {}).setdefault(record_type, {})
            if m.kind in pair:
                raise SystemExit(f"{m.origin}: record type {record_type} has two "
                                 f"{m.kind} schemas: {pair[m.kind]} and {m.name}")
            pair[m.kind] = m.name
    lines.append("}")
    lines.append("")
    lines.append("COORDINATOR_RECORDS = {")
    for coordinator in sorted(records):
        lines.append(f"    {coordinator!r}: {{")
        for record_type, pair in sorted(records[coordinator].items()):
            if set(pair) != {"coordinator-key", "coordinator-value"}:
                raise SystemExit(f"{coordinator} record type {record_type} lacks a key or a "
                                 f"value schema: {pair}")
            lines.append(f"        {record_type}: ({pair['coordinator-key']!r}, "
                         f"{pair['coordinator-value']!r}),")
        lines.append("    },")
    lines.append("}")
    lines.append("")
    return lines


def render_registry(apis: dict[int, dict], others: list[tuple[Message, str]]) -> str:
    manifest = json.loads((REPO / "schemas" / "manifest.json").read_text())
    lines = [
        f"# GENERATED by tools/gen_messages.py from Apache Kafka {pinned_version()}'s schemas "
        "(schemas/pin.json)",
        "# and schemas/manifest.json.",
        "# Do not edit by hand: change the generator, the pin or the manifest, then "
        "`make regenerate`.",
        '"""Registry of generated API modules, loaded on first use so importing stays cheap.',
        "",
        "``API_BY_KEY`` maps an api key to (name, module, request class, response class, valid",
        "versions, first flexible request version, first flexible response version).",
        "``ADVERTISED`` is our manifest: the version range each implemented API advertises in",
        "ApiVersions (see schemas/manifest.json). ``SCHEMAS`` lists the other generated classes",
        "(data schemas and coordinator records: module, kind, record type, valid versions, source",
        "jar) and ``COORDINATOR_RECORDS`` maps each coordinator's record types to their (key,",
        'value) classes, as written in __consumer_offsets, __transaction_state and __share_group_state."""',
        "",
        "import importlib",
        "from typing import NamedTuple",
        "",
        "",
        "class ApiInfo(NamedTuple):",
        "    name: str",
        "    module: str",
        "    request: str",
        "    response: str",
        "    valid_versions: tuple",
        "    request_flexible: int | None",
        "    response_flexible: int | None",
        "",
        "",
        "class SchemaInfo(NamedTuple):",
        "    module: str",
        "    kind: str",
        "    record_type: int | None",
        "    valid_versions: tuple",
        "    jar: str",
        "",
        "",
        "API_BY_KEY = {",
    ]
    for key in sorted(apis):
        a = apis[key]
        name = a["request"][: -len("Request")]
        lines.append(
            f"    {key}: ApiInfo({name!r}, {a['module']!r}, {a['request']!r}, {a['response']!r}, "
            f"{a['request_valid']}, {a['request_flexible']}, {a['response_flexible']}),")
    lines.append("}")
    lines.append("API_KEY_BY_NAME = {info.name: key for key, info in API_BY_KEY.items()}")
    lines.append("")
    lines.append("ADVERTISED = {")
    names = {apis[k]["request"][: -len("Request")]: k for k in apis}
    for entry in manifest["apis"]:
        key = names.get(entry["name"])
        if key is None:
            raise SystemExit(f"manifest names unknown api {entry['name']}")
        lines.append(f"    {key}: ({entry['min']}, {entry['max']}),  # {entry['name']}")
    lines.append("}")
    lines.append("")
    lines += render_others(others)
    lines.append('''
_modules = {}


def api_module(api_key: int):
    """The generated module of an API, imported on first use."""
    module = _modules.get(api_key)
    if module is None:
        module = importlib.import_module(f"{__name__}.{API_BY_KEY[api_key].module}")
        _modules[api_key] = module
    return module


def request_class(api_key: int):
    return getattr(api_module(api_key), API_BY_KEY[api_key].request)


def response_class(api_key: int):
    return getattr(api_module(api_key), API_BY_KEY[api_key].response)


def schema_class(name: str):
    """A generated data schema or coordinator record class by its schema name."""
    return getattr(importlib.import_module(f"{__name__}.{SCHEMAS[name].module}"), name)


def request_header_version(api_key: int, api_version: int) -> int:
    """Header v2 for flexible request versions, v1 otherwise (KIP-482)."""
    info = API_BY_KEY.get(api_key)
    if info is None or info.request_flexible is None:
        return 1
    return 2 if api_version >= info.request_flexible else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Header v1 for flexible response versions, v0 otherwise. ApiVersions always answers with
    v0 so that a client can parse the answer whatever version it asked for (KIP-511)."""
    if api_key == 18:
        return 0
    info = API_BY_KEY.get(api_key)
    if info is None or info.response_flexible is None:
        return 0
    return 1 if api_version >= info.response_flexible else 0
''')
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "kbroker" / "protocol" / "messages")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the output directory differs from what would be written")
    args = parser.parse_args(argv)
    files = generate(pinned_sources())
    existing = {p.name for p in args.out.glob("*.py")} if args.out.is_dir() else set()
    if args.check:
        stale = [n for n, c in files.items()
                 if not (args.out / n).exists() or (args.out / n).read_text() != c]
        stale += sorted(existing - set(files))
        if stale:
            print("generated code is out of date:", ", ".join(sorted(stale)))
            return 1
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name in existing - set(files):
        (args.out / name).unlink()
    for name, content in files.items():
        path = args.out / name
        if not path.exists() or path.read_text() != content:
            path.write_text(content)
    print(f"wrote {len(files)} modules to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
