#!/usr/bin/env python3
"""Generate kbroker/protocol/messages/ from Kafka's official JSON message schemas.

Sources, in order: the schema resources of the pinned ``kafka-python`` package (see
``schemas/pin.json``) or a directory given with ``--schemas``, then the schemas we author ourselves
in ``schemas/messages/``. The output is one module per API (request and response classes), a
``headers`` module, one module per ``data`` schema, and ``__init__.py`` with the registry of API
keys, the header-version rules and the advertised version ranges from ``schemas/manifest.json``.

The output is deterministic; ``tests/protocol/test_generated_up_to_date.py`` fails if running this
again changes the committed files.

Semantics follow Kafka's own generator: fields absent from a version take their defaults; encoding
a non-default value into a version that cannot carry it raises EncodeError unless the field is
``ignorable``; tagged fields are written only when they differ from their defaults; unknown tags
are kept on decode and written back.

    python tools/gen_messages.py [--schemas DIR] [--out DIR] [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

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


def load_schema(path: Path) -> dict:
    return json.loads(strip_comments(path.read_text(encoding="utf-8")))


def package_schema_dir() -> Path:
    pin = json.loads((REPO / "schemas" / "pin.json").read_text())
    try:
        from importlib.metadata import version
        import kafka.protocol.schemas.resources as resources
    except ImportError:
        sys.exit(f"install the schema source first: pip install {pin['package']}=={pin['version']}")
    installed = version(pin["package"])
    if installed != pin["version"]:
        sys.exit(f"{pin['package']} {installed} is installed but {pin['version']} is pinned")
    return Path(resources.__file__).parent


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


@dataclass
class Message:
    name: str
    kind: str
    api_key: int | None
    valid: tuple[int, int]
    flexible: tuple[int, int] | None
    root: Struct
    structs: list[Struct]
    source: str


def build_message(schema: dict, source: str) -> Message:
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
                raise SystemExit(f"{source}: unknown type {ftype}")
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
    return Message(name, schema["type"], schema.get("apiKey"), valid, flexible, root,
                   structs, source)


# --- code generation ---------------------------------------------------------------------------

def cond(rng: tuple[int, int] | None, valid: tuple[int, int]) -> str | None:
    """Python condition on `version` for rng, simplified within the valid range; None = always."""
    if rng is None:
        return "False"
    lo, hi = max(rng[0], valid[0]), min(rng[1], valid[1])
    if lo > hi:
        return "False"
    parts = []
    if lo > valid[0]:
        parts.append(f"version >= {lo}")
    if hi < valid[1]:
        parts.append(f"version <= {hi}")
    return " and ".join(parts) if parts else None


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


def nullable_cond(f: Field, valid):
    return cond(f.nullable, valid) if f.nullable else "False"


def gen_read_value(em: Emitter, ind: int, f: Field, target: str, valid, msg: Message):
    """Emit code reading one (non-tagged-header) value of field f into `target`."""
    nc = nullable_cond(f, valid)
    compact = "flexible" if (msg.flexible and not f.never_flexible) else "False"

    if f.is_array:
        em.emit(ind, f"if {compact}:")
        em.emit(ind + 1, f"n, pos = read_compact_array_length(buf, pos, {nc or 'True'})")
        em.emit(ind, "else:")
        em.emit(ind + 1, f"n, pos = read_array_length(buf, pos, {nc or 'True'})")
        em.emit(ind, "if n < 0:")
        em.emit(ind + 1, f"{target} = None")
        if f.struct:
            em.emit(ind, "else:")
            em.emit(ind + 1, "items = []")
            em.emit(ind + 1, "append = items.append")
            em.emit(ind + 1, f"reader = {f.struct.class_name}._read")
            em.emit(ind + 1, "for _ in range(n):")
            em.emit(ind + 2, "item, pos = reader(buf, pos, version)")
            em.emit(ind + 2, "append(item)")
            em.emit(ind + 1, f"{target} = items")
        elif f.type in FIXED:
            ch, size = FIXED[f.type]
            em.emit(ind, "else:")
            em.emit(ind + 1, f"check_fixed_array(buf, pos, n, {size})")
            em.emit(ind + 1, f"{target} = list(struct.unpack_from('>%d{ch}' % n, buf, pos))")
            em.emit(ind + 1, f"pos += n * {size}")
        else:
            em.emit(ind, "else:")
            em.emit(ind + 1, "items = []")
            em.emit(ind + 1, "for _ in range(n):")
            elem = Field(f.name, f.attr, f.type, False, f.versions, None, None, None, None,
                         False, f.never_flexible)
            gen_read_value(em, ind + 2, elem, "item", valid, msg)
            em.emit(ind + 2, "items.append(item)")
            em.emit(ind + 1, f"{target} = items")
        return
    if f.is_struct:
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
    names = {
        "string": ("read_string", "read_nullable_string", "read_compact_string",
                   "read_compact_nullable_string"),
        "bytes": ("read_bytes", "read_nullable_bytes", "read_compact_bytes",
                  "read_compact_nullable_bytes"),
        "records": ("read_records", "read_records", "read_compact_records",
                    "read_compact_records"),
    }[t]
    plain, plain_null, flex, flex_null = names

    def call(fn_plain, fn_flex, at):
        if f.never_flexible or msg.flexible is None:
            em.emit(at, f"{target}, pos = {fn_plain}(buf, pos)")
        else:
            em.emit(at, "if flexible:")
            em.emit(at + 1, f"{target}, pos = {fn_flex}(buf, pos)")
            em.emit(at, "else:")
            em.emit(at + 1, f"{target}, pos = {fn_plain}(buf, pos)")

    if nc == "False":
        call(plain, flex, ind)
    elif nc is None:
        call(plain_null, flex_null, ind)
    else:
        em.emit(ind, f"if {nc}:")
        call(plain_null, flex_null, ind + 1)
        em.emit(ind, "else:")
        call(plain, flex, ind + 1)


def gen_write_value(em: Emitter, ind: int, f: Field, value: str, out: str, valid, msg: Message):
    nc = nullable_cond(f, valid)
    flexible_known = not (f.never_flexible or msg.flexible is None)

    def null_guard_start():
        # Writing None into a version where the field is not nullable is an error.
        if nc != "None":
            em.emit(ind, f"if {value} is None and not ({nc or 'True'}):")
            em.emit(ind + 1, f"raise EncodeError('{f.name} cannot be null in version %d' % version)")

    if f.is_array:
        null_guard_start()
        em.emit(ind, f"if {value} is None:")
        if flexible_known:
            em.emit(ind + 1, f"{out} += b'\\x00' if flexible else b'\\xff\\xff\\xff\\xff'")
        else:
            em.emit(ind + 1, f"{out} += b'\\xff\\xff\\xff\\xff'")
        em.emit(ind, "else:")
        if flexible_known:
            em.emit(ind + 1, "if flexible:")
            em.emit(ind + 2, f"write_uvarint({out}, len({value}) + 1)")
            em.emit(ind + 1, "else:")
            em.emit(ind + 2, f"{out} += _S_i.pack(len({value}))")
        else:
            em.emit(ind + 1, f"{out} += _S_i.pack(len({value}))")
        if f.struct:
            em.emit(ind + 1, f"for item in {value}:")
            em.emit(ind + 2, f"item._write({out}, version, splices)")
        elif f.type in FIXED:
            ch, _ = FIXED[f.type]
            em.emit(ind + 1, f"{out} += struct.pack('>%d{ch}' % len({value}), *{value})")
        else:
            em.emit(ind + 1, f"for item in {value}:")
            elem = Field(f.name, f.attr, f.type, False, f.versions, None, None, None, None,
                         False, f.never_flexible)
            gen_write_value(em, ind + 2, elem, "item", out, valid, msg)
        return
    if f.is_struct:
        if f.nullable:
            null_guard_start()
            em.emit(ind, f"if {value} is None:")
            em.emit(ind + 1, f"{out} += b'\\xff'")
            em.emit(ind, "else:")
            em.emit(ind + 1, f"{out} += b'\\x01'")
            em.emit(ind + 1, f"{value}._write({out}, version, splices)")
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
        compact = "flexible" if flexible_known else "False"
        em.emit(ind, f"write_records({out}, {value}, splices, {compact})")
        return
    base = {"string": "string", "bytes": "bytes"}[t]
    nullable_fn = f"write_nullable_{base}"
    plain_fn = f"write_{base}"
    if nc == "False":
        fns = (plain_fn, f"write_compact_{base}")
    elif nc is None:
        fns = (nullable_fn, f"write_compact_nullable_{base}")
    else:
        null_guard_start()
        fns = (nullable_fn, f"write_compact_nullable_{base}")
    if nc == "False":
        em.emit(ind, f"if {value} is None:")
        em.emit(ind + 1, f"raise EncodeError('{f.name} cannot be null in version %d' % version)")
    if flexible_known:
        em.emit(ind, "if flexible:")
        em.emit(ind + 1, f"{fns[1]}({out}, {value})")
        em.emit(ind, "else:")
        em.emit(ind + 1, f"{fns[0]}({out}, {value})")
    else:
        em.emit(ind, f"{fns[0]}({out}, {value})")


def is_tagged_only(f: Field, valid) -> bool:
    """True when, in every valid version that has the field, it is a tagged field."""
    if f.tagged is None:
        return False
    lo = max(f.versions[0], valid[0])
    hi = min(f.versions[1], valid[1])
    return f.tagged[0] <= lo and f.tagged[1] >= hi


def field_groups(st: Struct, valid):
    """Split a struct's fields into runs; consecutive fixed-width fields present under the same
    condition are read and written with one struct format."""
    groups = []
    for f in st.fields:
        present = cond(f.versions, valid)
        tagged_always = is_tagged_only(f, valid)
        is_fixed = (f.type in FIXED and not f.is_array and f.tagged is None
                    and present != "False")
        if (is_fixed and groups and groups[-1][0] == "fixed" and groups[-1][1] == present):
            groups[-1][2].append(f)
        elif is_fixed:
            groups.append(["fixed", present, [f]])
        else:
            groups.append(["single", present, [f], tagged_always])
    return groups


def gen_struct(em: Emitter, st: Struct, msg: Message):
    valid = msg.valid
    flex = msg.flexible
    flex_cond = cond(flex, valid) if flex else "False"
    flex_expr = "True" if flex_cond is None else flex_cond
    attrs = [f.attr for f in st.fields]
    tagged_fields = [f for f in st.fields if f.tagged is not None]
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
    # _read
    em.emit(1, "@staticmethod")
    em.emit(1, "def _read(buf, pos, version):")
    em.emit(2, f"self = {st.class_name}.__new__({st.class_name})")
    if flex:
        em.emit(2, f"flexible = {flex_expr}")
    for group in field_groups(st, valid):
        kind, present, fields = group[0], group[1], group[2]
        if present == "False":
            for f in fields:
                em.emit(2, f"self.{f.attr} = {default_expr(f, valid)}")
            continue
        ind = 2
        if kind == "single" and fields[0].tagged is not None and group[3]:
            # Always tagged in the valid versions: only the default here, set by the tag section.
            f = fields[0]
            em.emit(2, f"self.{f.attr} = {default_expr(f, valid)}")
            continue
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
            if f.tagged is not None:
                # Tagged in some versions, a regular field in others.
                tc = cond(f.tagged, valid)
                em.emit(ind, f"if {tc}:")
                em.emit(ind + 1, f"self.{f.attr} = {default_expr(f, valid)}")
                em.emit(ind, "else:")
                gen_read_value(em, ind + 1, f, f"self.{f.attr}", valid, msg)
            else:
                gen_read_value(em, ind, f, f"self.{f.attr}", valid, msg)
        if present is not None:
            em.emit(2, "else:")
            for f in fields:
                em.emit(3, f"self.{f.attr} = {default_expr(f, valid)}")
    em.emit(2, "self.unknown_tagged_fields = None")
    if flex and not tagged_fields:
        em.emit(2, "if flexible:")
        em.emit(3, "self.unknown_tagged_fields, pos = read_unknown_tags(buf, pos)")
    elif flex:
        em.emit(2, "if flexible:")
        em.emit(3, "n_tags, pos = read_tag_count(buf, pos)")
        em.emit(3, "for _ in range(n_tags):")
        em.emit(4, "tag, size, pos = read_tag_header(buf, pos)")
        em.emit(4, "end = pos + size")
        first = True
        for f in tagged_fields:
            tc = cond(f.tagged, valid)
            c = f"tag == {f.tag}" + (f" and {tc}" if tc else "")
            em.emit(4, f"{'if' if first else 'elif'} {c}:")
            first = False
            gen_read_value(em, 5, f, f"self.{f.attr}", valid, msg)
            em.emit(5, "if pos != end:")
            em.emit(6, f"raise DecodeError('tagged field {f.name} has the wrong size')")
        em.emit(4, "else:")
        em.emit(5, "if self.unknown_tagged_fields is None:")
        em.emit(6, "self.unknown_tagged_fields = []")
        em.emit(5, "self.unknown_tagged_fields.append((tag, bytes(buf[pos:end])))")
        em.emit(5, "pos = end")
    em.emit(2, "return self, pos")
    em.emit(0)
    # _write
    em.emit(1, "def _write(self, out, version, splices):")
    if flex:
        em.emit(2, f"flexible = {flex_expr}")
    for group in field_groups(st, valid):
        kind, present, fields = group[0], group[1], group[2]
        if kind == "single" and fields[0].tagged is not None and group[3]:
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
            if f.tagged is not None:
                tc = cond(f.tagged, valid)
                em.emit(ind, f"if not ({tc}):")
                gen_write_value(em, ind + 1, f, f"self.{f.attr}", "out", valid, msg)
            else:
                gen_write_value(em, ind, f, f"self.{f.attr}", "out", valid, msg)
        if present is not None:
            absent = [f for f in fields if not f.ignorable]
            if absent:
                em.emit(2, "else:")
                for f in absent:
                    gen_absent_check(em, 3, f, valid)
    for f in tagged_fields:
        if f.ignorable or not is_tagged_only(f, valid):
            continue
        tc = cond(f.tagged, valid)
        if tc is not None:
            # A tagged field that this version cannot carry must hold its default.
            em.emit(2, f"if not ({tc}) and self.{f.attr} != {default_expr(f, valid)}:")
            em.emit(3, f"raise EncodeError('{f.name} is not supported in version %d' % version)")
    if flex:
        em.emit(2, "if flexible:")
        if not tagged_fields:
            em.emit(3, "write_unknown_tags(out, self.unknown_tagged_fields)")
        else:
            em.emit(3, "tagged = list(self.unknown_tagged_fields or ())")
            for f in tagged_fields:
                tc = cond(f.tagged, valid)
                c = f"self.{f.attr} != {default_expr(f, valid)}"
                if tc:
                    c = f"{tc} and {c}"
                em.emit(3, f"if {c}:")
                em.emit(4, "field_out = bytearray()")
                gen_write_value(em, 4, f, f"self.{f.attr}", "field_out", valid, msg)
                em.emit(4, f"tagged.append(({f.tag}, field_out))")
            em.emit(3, "write_tagged_fields(out, tagged)")
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


def gen_absent_check(em: Emitter, ind: int, f: Field, valid):
    if f.ignorable:
        return
    d = default_expr(f, valid)
    em.emit(ind, f"if self.{f.attr} != {d}:")
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
# GENERATED by tools/gen_messages.py from {sources}.
# Do not edit by hand: change the generator or the schema and run `python tools/gen_messages.py`.
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
    sources = ", ".join(m.source for m in messages)
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


def generate(schema_dirs: list[Path], out_dir: Path) -> dict[str, str]:
    """Returns {relative file name: content}."""
    messages: dict[str, list[Message]] = {}
    seen: dict[str, str] = {}
    for d in schema_dirs:
        for path in sorted(d.glob("*.json")):
            schema = load_schema(path)
            name = schema["name"]
            if name in seen:
                raise SystemExit(f"{path}: {name} is also defined in {seen[name]}")
            seen[name] = str(path)
            source = f"{path.name}" if d != REPO / "schemas" / "messages" else \
                f"schemas/messages/{path.name}"
            msg = build_message(schema, source)
            messages.setdefault(module_name_for(name, msg.kind), []).append(msg)

    files: dict[str, str] = {}
    apis: dict[int, dict] = {}
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
    files["__init__.py"] = render_registry(apis)
    return files


def render_registry(apis: dict[int, dict]) -> str:
    manifest = json.loads((REPO / "schemas" / "manifest.json").read_text())
    lines = [
        "# GENERATED by tools/gen_messages.py from the schemas and schemas/manifest.json.",
        "# Do not edit by hand: change the generator or the schema and run "
        "`python tools/gen_messages.py`.",
        '"""Registry of generated API modules, loaded on first use so importing stays cheap.',
        "",
        "``API_BY_KEY`` maps an api key to (name, module, request class, response class, valid",
        "versions, first flexible request version, first flexible response version).",
        "``ADVERTISED`` is our manifest: the version range each implemented API advertises in",
        'ApiVersions (see schemas/manifest.json)."""',
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
    parser.add_argument("--schemas", type=Path, help="directory of official schema JSON files")
    parser.add_argument("--out", type=Path, default=REPO / "kbroker" / "protocol" / "messages")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the output directory differs from what would be written")
    args = parser.parse_args(argv)
    dirs = [args.schemas or package_schema_dir()]
    ours = REPO / "schemas" / "messages"
    if ours.is_dir():
        dirs.append(ours)
    files = generate(dirs, args.out)
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
