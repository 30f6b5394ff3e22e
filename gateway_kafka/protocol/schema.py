"""The schema DSL: every Kafka API's request and response declared once, compiled per version.

A declaration is an indented block of field lines (see ``messages.py``)::

    name: type [versions] [null:versions] [tag:N:versions] [=default]

- ``type``: int8 int16 int32 int64 uint16 uint32 float64 bool string bytes records uuid,
  ``[int32]``-style arrays of a primitive, ``[]`` an array of structs and ``{}`` one struct;
  the struct's fields follow, indented one more level.
- ``versions`` where the field exists (``0+``, ``3-7``, ``4``; omitted = ``0+``).
- ``null:`` versions in which the field may be null.
- ``tag:N:`` the field's tag number and the versions in which it travels as a tagged field.
- ``=default``: ``null``, ``true``/``false``, an integer (hex allowed) or ``""``.

Field names are snake_case of Kafka's JSON names (``PartitionIndex`` -> ``partition_index``);
bodies are plain dicts keyed by them.

Invariants:
- A (fields, version, flexible) combination is compiled once to a pair of closures
  (read, write) and cached; the hot paths never interpret the declarations again.
- Decoding fills every field present in the version: absent tagged fields take their default,
  unknown tags are skipped. Encoding ignores keys not present in the version and uses the
  default for missing ones; ``None`` for a field not nullable in the version encodes the
  type's zero value.
- ``records`` fields decode to a memoryview of the frame (no copy) and encode from bytes,
  a memoryview or a list of buffers written back to back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from . import primitives as p

_PRIMITIVE_CODECS = {
    "int8": (p.read_int8, p.write_int8, 0),
    "int16": (p.read_int16, p.write_int16, 0),
    "int32": (p.read_int32, p.write_int32, 0),
    "int64": (p.read_int64, p.write_int64, 0),
    "uint16": (p.read_uint16, p.write_uint16, 0),
    "uint32": (p.read_uint32, p.write_uint32, 0),
    "float64": (p.read_float64, p.write_float64, 0.0),
    "bool": (p.read_bool, p.write_bool, False),
    "uuid": (p.read_uuid, p.write_uuid, p.ZERO_UUID),
}
_LENGTH_TYPES = {"string": "", "bytes": b"", "records": b""}


class SchemaError(ValueError):
    """A declaration in the DSL is malformed (a bug in messages.py, found at import)."""


@dataclass(frozen=True)
class VersionRange:
    low: int
    high: int | None  # None: open ended

    @classmethod
    def parse(cls, text: str | None) -> "VersionRange | None":
        if text is None or text == "none":
            return None
        m = re.fullmatch(r"(\d+)(\+|-(\d+))?", text)
        if not m:
            raise SchemaError(f"bad version range {text!r}")
        low = int(m.group(1))
        if m.group(2) == "+":
            return cls(low, None)
        if m.group(3) is not None:
            return cls(low, int(m.group(3)))
        return cls(low, low)

    def __contains__(self, version: int) -> bool:
        return self.low <= version and (self.high is None or version <= self.high)


def _in(rng: VersionRange | None, version: int) -> bool:
    return rng is not None and version in rng


@dataclass
class Field:
    name: str
    type: str                 # primitive name, "[]" (struct array), "{}" (struct), "[prim]"
    versions: VersionRange | None
    nullable: VersionRange | None = None
    tag: int | None = None
    tagged: VersionRange | None = None
    explicit_default: Any = None
    has_default: bool = False
    fields: list["Field"] = field(default_factory=list)

    def default(self, version: int) -> Any:
        """The value a missing field takes in ``version`` (a fresh object for containers)."""
        if self.has_default:
            return self.explicit_default
        if _in(self.nullable, version):
            return None
        if self.type == "{}":
            return {f.name: f.default(version) for f in self.fields if _in(f.versions, version)}
        if self.type.startswith("["):
            return []
        if self.type in _LENGTH_TYPES:
            return _LENGTH_TYPES[self.type]
        return _PRIMITIVE_CODECS[self.type][2]


_LINE = re.compile(r"^(?P<indent> *)(?P<name>[a-z0-9_]+):\s+(?P<type>\S+)(?P<rest>.*)$")


def _parse_default(ftype: str, text: str) -> Any:
    if text == "null":
        return None
    if text == '""':
        return ""
    if ftype == "bool":
        if text not in ("true", "false"):
            raise SchemaError(f"bad bool default {text!r}")
        return text == "true"
    if ftype in ("string",):
        return text
    return int(text, 0)


def parse_fields(text: str) -> list[Field]:
    """Parse an indented DSL block into a field tree."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if not lines:
        return []
    base = min(len(ln) - len(ln.lstrip(" ")) for ln in lines)
    root: list[Field] = []
    stack: list[tuple[int, list[Field]]] = [(-1, root)]
    for ln in lines:
        m = _LINE.match(ln[base:])
        if not m:
            raise SchemaError(f"cannot parse field line {ln.strip()!r}")
        indent = len(m.group("indent"))
        ftype = m.group("type")
        rest = m.group("rest").split()
        versions = VersionRange(0, None)
        fld = Field(m.group("name"), ftype, versions)
        for tok in rest:
            if tok.startswith("null:"):
                fld.nullable = VersionRange.parse(tok[5:])
            elif tok.startswith("tag:"):
                _, num, rng = tok.split(":")
                fld.tag = int(num)
                fld.tagged = VersionRange.parse(rng)
            elif tok.startswith("="):
                fld.has_default = True
                fld.explicit_default = _parse_default(ftype, tok[1:])
            else:
                fld.versions = VersionRange.parse(tok)
        if ftype not in _PRIMITIVE_CODECS and ftype not in _LENGTH_TYPES and ftype not in ("[]", "{}"):
            inner = ftype[1:-1] if ftype.startswith("[") and ftype.endswith("]") else None
            if inner is None or (inner not in _PRIMITIVE_CODECS and inner not in ("string", "bytes")):
                raise SchemaError(f"unknown type {ftype!r} for field {fld.name}")
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].append(fld)
        if ftype in ("[]", "{}"):
            stack.append((indent, fld.fields))
    return root


# ---------------------------------------------------------------------------------------------
# Compilation: (fields, version, flexible) -> (read(buf, pos) -> (dict, pos), write(w, dict))
# ---------------------------------------------------------------------------------------------

Reader = Callable[[Any, int], tuple[Any, int]]
WriterFn = Callable[[p.Writer, Any], None]


def _field_codec(fld: Field, version: int, flexible: bool) -> tuple[Reader, WriterFn]:
    nullable = _in(fld.nullable, version)
    t = fld.type
    if t in _PRIMITIVE_CODECS:
        read, write, _zero = _PRIMITIVE_CODECS[t]
        return read, write
    if t == "string":
        return p.string_codec(flexible, nullable)
    if t == "bytes":
        return p.bytes_codec(flexible, nullable)
    if t == "records":
        return p.bytes_codec(flexible, nullable, zero_copy=True)
    if t == "{}":
        read_s, write_s = compile_struct(fld.fields, version, flexible)
        if nullable:
            return _nullable_struct(read_s, write_s)
        return read_s, write_s
    if t == "[]":
        read_s, write_s = compile_struct(fld.fields, version, flexible)
        return p.array_codec(flexible, nullable, read_s, write_s)
    inner = t[1:-1]
    if inner == "string":
        read_i, write_i = p.string_codec(flexible, False)
    elif inner == "bytes":
        read_i, write_i = p.bytes_codec(flexible, False)
    else:
        read_i, write_i = _PRIMITIVE_CODECS[inner][:2]
    return p.array_codec(flexible, nullable, read_i, write_i)


def _nullable_struct(read_s: Reader, write_s: WriterFn) -> tuple[Reader, WriterFn]:
    # Kafka writes a nullable struct behind an int8 marker: -1 null, 1 present.
    def read(buf, pos):
        marker, pos = p.read_int8(buf, pos)
        if marker < 0:
            return None, pos
        return read_s(buf, pos)

    def write(w, v):
        if v is None:
            w.buf.append(0xFF)
        else:
            w.buf.append(1)
            write_s(w, v)

    return read, write


_STRUCT_CACHE: dict[tuple[int, int, bool], tuple[Reader, WriterFn]] = {}


def compile_struct(fields: list[Field], version: int, flexible: bool) -> tuple[Reader, WriterFn]:
    key = (id(fields), version, flexible)
    cached = _STRUCT_CACHE.get(key)
    if cached is not None:
        return cached
    regular: list[tuple[str, Reader, WriterFn, Field]] = []
    tagged: dict[int, tuple[str, Reader, WriterFn, Field]] = {}
    for fld in fields:
        if not _in(fld.versions, version):
            continue
        read, write = _field_codec(fld, version, flexible)
        if flexible and _in(fld.tagged, version):
            if fld.tag in tagged:
                raise SchemaError(f"duplicate tag {fld.tag} in version {version}")
            tagged[fld.tag] = (fld.name, read, write, fld)
        else:
            regular.append((fld.name, read, write, fld))

    reg_readers = tuple((name, read) for name, read, _w, _f in regular)
    # Scalar defaults are shared; container defaults are made fresh per use.
    reg_writers = tuple((name, write, fld.default(version)) for name, _r, write, fld in regular)
    tag_order = tuple(sorted(tagged.items()))
    tag_readers = {tag: (name, read) for tag, (name, read, _w, _f) in tagged.items()}
    tag_defaults = tuple((name, fld) for _t, (name, _r, _w, fld) in tag_order)
    tag_writers = tuple((tag, name, write, fld.default(version))
                        for tag, (name, _r, write, fld) in tag_order)

    if not flexible:
        def read_struct(buf, pos):
            d = {}
            for name, read in reg_readers:
                d[name], pos = read(buf, pos)
            return d, pos

        def write_struct(w, d):
            if d is None:
                d = {}
            get = d.get
            for name, write, default in reg_writers:
                write(w, get(name, default))
    else:
        read_uvarint = p.read_uvarint
        write_uvarint = p.write_uvarint

        def read_struct(buf, pos):
            d = {}
            for name, read in reg_readers:
                d[name], pos = read(buf, pos)
            for name, fld in tag_defaults:
                d[name] = fld.default(version)
            count, pos = read_uvarint(buf, pos)
            for _ in range(count):
                tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                end = pos + size
                if end > len(buf):
                    raise p.ProtocolDecodeError(f"tagged field {tag} runs past the frame end")
                known = tag_readers.get(tag)
                if known is not None:
                    name, read = known
                    d[name], got = read(buf, pos)
                    if got != end:
                        raise p.ProtocolDecodeError(
                            f"tagged field {name} (tag {tag}) declares {size} bytes, used {got - pos}"
                        )
                pos = end
            return d, pos

        def write_struct(w, d):
            if d is None:
                d = {}
            get = d.get
            for name, write, default in reg_writers:
                write(w, get(name, default))
            if not tag_order:
                w.buf.append(0)
                return
            present = []
            for tag, name, write, default in tag_writers:
                if name not in d:
                    continue
                v = d[name]
                if v == default:  # Kafka writes a tagged field only when it differs from default
                    continue
                sub = p.Writer()
                write(sub, v)
                present.append((tag, sub.getvalue()))
            write_uvarint(w.buf, len(present))
            for tag, data in present:
                write_uvarint(w.buf, tag)
                write_uvarint(w.buf, len(data))
                w.buf += data

    _STRUCT_CACHE[key] = (read_struct, write_struct)
    return read_struct, write_struct


# ---------------------------------------------------------------------------------------------
# API registry
# ---------------------------------------------------------------------------------------------


@dataclass
class ApiDeclaration:
    key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None
    request: list[Field]
    response: list[Field]

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def request_codec(self, version: int) -> tuple[Reader, WriterFn]:
        return compile_struct(self.request, version, self.is_flexible(version))

    def response_codec(self, version: int) -> tuple[Reader, WriterFn]:
        return compile_struct(self.response, version, self.is_flexible(version))


APIS: dict[int, ApiDeclaration] = {}


def api(key: int, name: str, versions: str, *, flexible: str, request: str, response: str) -> None:
    """Declare one API; duplicates are a bug and fail at import."""
    if key in APIS:
        raise SchemaError(f"api key {key} declared twice ({APIS[key].name}, {name})")
    rng = VersionRange.parse(versions)
    flex = VersionRange.parse(flexible)
    if rng is None or rng.high is None:
        raise SchemaError(f"{name}: versions must be a closed range, got {versions!r}")
    APIS[key] = ApiDeclaration(key, name, rng.low, rng.high, flex.low if flex else None,
                               parse_fields(request), parse_fields(response))
