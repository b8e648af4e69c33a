"""The protocol-buffer wire format with NumPy, for the array paths.

Packing: a message whose every item has the same size (the goals of a
batch, the frames of a clip) is laid out once as a byte template with
float64 slots (`Layout`), then N copies are written in one go and the
slots filled from arrays: no per-item Python work.

Unpacking: `scan` reads the fields of many messages in lock-step (one
NumPy step per field, all messages at once), so a batch answer of 1,000
items costs a few dozen array operations instead of 1,000 objects.
Anything it does not expect makes the caller fall back to the protobuf
classes (`WireMismatch`).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class WireMismatch(Exception):
    """The bytes are not laid out as the fast decoder expects."""


def varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint((field << 3) | wire_type)


def length_delimited(field: int, payload: bytes) -> bytes:
    return tag(field, LENGTH) + varint(len(payload)) + payload


# --- packing ---------------------------------------------------------------

QUAT_BYTES = 36  # w, x, y, z: four (tag, float64)
VEC3_BYTES = 27


class Layout:
    """A fixed-size message: constant bytes and named float64 slots (or
    runs of quaternions / vectors), filled for N items by `pack`."""

    def __init__(self):
        self._chunks: List[bytes] = []
        self.size = 0
        self._fields: Dict[str, Tuple[object, int]] = {}

    def const(self, data: bytes) -> "Layout":
        self._chunks.append(data)
        self.size += len(data)
        return self

    def double(self, field: int, name: str) -> "Layout":
        self.const(tag(field, FIXED64))
        self._fields[name] = ("<f8", self.size)
        return self.const(bytes(8))

    def vec3(self, field: int, name: str) -> "Layout":
        """A Vec3 submessage; slot `name` takes (..., 3)."""
        self.const(tag(field, LENGTH) + varint(VEC3_BYTES))
        self._fields[name] = (_VEC3, self.size)
        return self.const(_VEC3_TEMPLATE)

    def quat(self, field: int, name: str) -> "Layout":
        """A Quat submessage; slot `name` takes (..., 4) (w, x, y, z)."""
        self.const(tag(field, LENGTH) + varint(QUAT_BYTES))
        self._fields[name] = (_QUAT, self.size)
        return self.const(_QUAT_TEMPLATE)

    def quats(self, field: int, count: int, name: str) -> "Layout":
        """`count` repeated Quat submessages; slot `name` takes (..., count, 4)."""
        if count:
            record = np.dtype({"names": ["q"], "formats": [_QUAT], "offsets": [2],
                               "itemsize": QUAT_BYTES + 2})
            self._fields[name] = ((record, (count,)), self.size)
            one = tag(field, LENGTH) + varint(QUAT_BYTES) + _QUAT_TEMPLATE
            assert len(one) == QUAT_BYTES + 2
            self.const(one * count)
        return self

    def sub(self, field: int, inner: "Layout", prefix: str) -> "Layout":
        """`inner` as a submessage; its slots as prefix + name."""
        self.const(tag(field, LENGTH) + varint(inner.size))
        base = self.size
        for name, (fmt, offset) in inner._fields.items():
            self._fields[prefix + name] = (fmt, base + offset)
        self._chunks.extend(inner._chunks)
        self.size += inner.size
        return self

    def template(self) -> bytes:
        return b"".join(self._chunks)

    def dtype(self) -> np.dtype:
        names = list(self._fields)
        return np.dtype({"names": names, "formats": [self._fields[n][0] for n in names],
                         "offsets": [self._fields[n][1] for n in names], "itemsize": self.size})

    def pack(self, count: int, values: Dict[str, np.ndarray]) -> np.ndarray:
        """`count` copies, slots filled from `values` (arrays with a
        leading dimension of `count`, or broadcastable to it). Returns the
        (count, size) uint8 array."""
        raw = np.empty((count, self.size), np.uint8)
        raw[:] = np.frombuffer(self.template(), np.uint8)
        records = raw.view(self.dtype()).reshape(count)
        for name, value in values.items():
            fmt = self._fields[name][0]
            target = records[name]
            if fmt is _QUAT or fmt is _VEC3:
                axes = fmt.names
                value = np.broadcast_to(value, (count, len(axes)))
                for i, axis in enumerate(axes):
                    target[axis] = value[:, i]
            elif isinstance(fmt, tuple):  # a run of quaternions
                q = target["q"]
                value = np.broadcast_to(value, q.shape + (4,))
                for i, axis in enumerate("wxyz"):
                    q[axis] = value[..., i]
            else:
                target[...] = value
        return raw


def _quat_dtype() -> np.dtype:
    return np.dtype({"names": list("wxyz"), "formats": ["<f8"] * 4,
                     "offsets": [1, 10, 19, 28], "itemsize": QUAT_BYTES})


def _vec3_dtype() -> np.dtype:
    return np.dtype({"names": list("xyz"), "formats": ["<f8"] * 3,
                     "offsets": [1, 10, 19], "itemsize": VEC3_BYTES})


_QUAT = _quat_dtype()
_VEC3 = _vec3_dtype()
_QUAT_TEMPLATE = b"".join(tag(f, FIXED64) + bytes(8) for f in (1, 2, 3, 4))
_VEC3_TEMPLATE = b"".join(tag(f, FIXED64) + bytes(8) for f in (1, 2, 3))


def frame_records(raw: np.ndarray, field: int) -> bytes:
    """(N, size) packed messages as N occurrences of a repeated
    length-delimited field."""
    count, size = raw.shape
    head = np.frombuffer(tag(field, LENGTH) + varint(size), np.uint8)
    out = np.empty((count, len(head) + size), np.uint8)
    out[:, :len(head)] = head
    out[:, len(head):] = raw
    return out.tobytes()


# --- unpacking -------------------------------------------------------------

class Fields:
    """Every field of N messages: for entry k, the message index, field
    number, wire type, where its value starts and its length (varints:
    their value in `value`, length their byte count). Entries are in the
    order they were read: all first fields, then all second fields, ...;
    `select` puts one field's entries in message order."""

    def __init__(self, buf, msg, field, wire, start, length, value):
        self.buf, self.msg, self.field, self.wire = buf, msg, field, wire
        self.start, self.length, self.value = start, length, value

    def select(self, field: int, wire: Optional[int] = None) -> np.ndarray:
        """Entry indices of `field` (in message order), checking its wire type."""
        hit = np.flatnonzero(self.field == field)
        if len(hit) > 1:
            hit = hit[np.argsort(self.msg[hit], kind="stable")]
        if wire is not None and len(hit) and np.any(self.wire[hit] != wire):
            raise WireMismatch(f"field {field}: wire type")
        return hit


def _read_varints(buf: np.ndarray, pos: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Varints at `pos`: (values as uint64, positions after them)."""
    byte = buf[pos]
    value = (byte & 0x7F).astype(np.uint64)
    more = np.flatnonzero(byte & 0x80)
    end = pos + 1
    shift = 7
    while len(more):
        if shift > 63:
            raise WireMismatch("varint too long")
        byte = buf[end[more]]
        value[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        end[more] += 1
        more = more[(byte & 0x80) != 0]
        shift += 7
    return value, end


def scan(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Fields:
    """The fields of the messages buf[starts[i]:ends[i]], read in lock-step.
    `buf` must have 10 bytes of padding past the last message."""
    starts = np.asarray(starts, np.int64)
    ends = np.asarray(ends, np.int64)
    pos = starts.copy()
    live = np.flatnonzero(pos < ends)
    parts = []
    while len(live):
        key, after = _read_varints(buf, pos[live])
        field = (key >> np.uint64(3)).astype(np.int64)
        wire = (key & np.uint64(7)).astype(np.int64)
        start = after
        length = np.zeros(len(live), np.int64)
        value = np.zeros(len(live), np.uint64)
        kind = wire == VARINT
        if kind.any():
            v, e = _read_varints(buf, after[kind])
            value[kind] = v
            length[kind] = e - after[kind]
        length[wire == FIXED64] = 8
        length[wire == FIXED32] = 4
        kind = wire == LENGTH
        if kind.any():
            v, e = _read_varints(buf, after[kind])
            start[kind] = e
            length[kind] = v.astype(np.int64)
        if np.any((wire == 3) | (wire == 4) | (wire > 5)) or np.any(field == 0):
            raise WireMismatch("unexpected wire type")
        new = start + length
        if np.any(new > ends[live]):
            raise WireMismatch("field past the end of its message")
        parts.append((live, field, wire, start, length, value))
        pos[live] = new
        live = live[new < ends[live]]
    if not parts:
        empty = np.zeros(0, np.int64)
        return Fields(buf, empty, empty, empty, empty, empty, np.zeros(0, np.uint64))
    if len(parts) == 1:
        return Fields(buf, *parts[0])
    return Fields(buf, *(np.concatenate(c) for c in zip(*parts)))


def scan_one(buf: np.ndarray, start: int, end: int) -> Fields:
    """`scan` of one message, in Python (cheaper for one)."""
    data = bytes(buf[start:end])
    fields, wires, starts, lengths, values = [], [], [], [], []
    pos, n = 0, len(data)

    def read():
        nonlocal pos
        value, shift = 0, 0
        while True:
            if pos >= n or shift > 63:
                raise WireMismatch("truncated varint")
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while pos < n:
        key = read()
        field, wire = key >> 3, key & 7
        value = 0
        if wire == VARINT:
            at = pos
            value = read()
            length = pos - at
        elif wire == FIXED64:
            at, length = pos, 8
        elif wire == FIXED32:
            at, length = pos, 4
        elif wire == LENGTH:
            length = read()
            at = pos
        else:
            raise WireMismatch("unexpected wire type")
        if field == 0 or at + length > n:
            raise WireMismatch("field past the end of its message")
        pos = at + length
        fields.append(field)
        wires.append(wire)
        starts.append(start + at)
        lengths.append(length)
        values.append(value)
    i64 = np.int64
    return Fields(buf, np.zeros(len(fields), i64), np.array(fields, i64), np.array(wires, i64),
                  np.array(starts, i64), np.array(lengths, i64), np.array(values, np.uint64))


def padded(data: bytes) -> np.ndarray:
    buf = np.zeros(len(data) + 16, np.uint8)
    buf[:len(data)] = np.frombuffer(data, np.uint8)
    return buf


_VIEWS: Dict[int, type] = {}


def _view(field: int) -> type:
    """A message class with only `repeated bytes f = field`: the C++
    parser then splits a message's occurrences of that field."""
    cls = _VIEWS.get(field)
    if cls is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        proto = descriptor_pb2.FileDescriptorProto(name=f"reach_wire_view_{field}.proto",
                                                   package="reach_wire_view", syntax="proto3")
        message = proto.message_type.add(name=f"View{field}")
        message.field.add(name="f", number=field, type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
                          label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)
        cls = message_factory.MessageFactory(pool).GetPrototype(
            pool.FindMessageTypeByName(f"reach_wire_view.View{field}"))
        _VIEWS[field] = cls
    return cls


def split(data: bytes, field: int) -> Tuple[bytes, np.ndarray, np.ndarray]:
    """Every occurrence of length-delimited `field` at the top of `data`:
    their bytes concatenated, and where each starts and ends in them."""
    try:
        parts = list(_view(field).FromString(data).f)
    except Exception as e:  # DecodeError, or a wire type that is no bytes
        raise WireMismatch(str(e)) from None
    ends = np.cumsum(np.fromiter(map(len, parts), np.int64, len(parts)))
    return b"".join(parts), ends - np.diff(np.concatenate(([0], ends))), ends


def top_level(data: bytes, field: int) -> Tuple[np.ndarray, np.ndarray, bytes]:
    """Starts and ends of every occurrence of length-delimited `field` at
    the top of `data` (one message), and the bytes of the other fields."""
    starts: List[int] = []
    ends: List[int] = []
    rest = bytearray()
    pos, n = 0, len(data)
    want = (field << 3) | LENGTH
    while pos < n:
        at = pos
        key = data[pos]
        pos += 1
        if key & 0x80:
            shift, key = 7, key & 0x7F
            while True:
                b = data[pos]
                pos += 1
                key |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
        wire = key & 7
        if wire == LENGTH:
            b = data[pos]
            pos += 1
            size = b & 0x7F
            shift = 7
            while b & 0x80:
                b = data[pos]
                pos += 1
                size |= (b & 0x7F) << shift
                shift += 7
            if key == want:
                starts.append(pos)
                ends.append(pos + size)
            else:
                rest += data[at:pos + size]
            pos += size
        elif wire == VARINT:
            while data[pos] & 0x80:
                pos += 1
            pos += 1
            rest += data[at:pos]
        elif wire == FIXED64:
            pos += 8
            rest += data[at:pos]
        elif wire == FIXED32:
            pos += 4
            rest += data[at:pos]
        else:
            raise WireMismatch("unexpected wire type")
    if pos != n:
        raise WireMismatch("truncated")
    return np.asarray(starts, np.int64), np.asarray(ends, np.int64), bytes(rest)


def gather(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The bytes of every range, concatenated."""
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.uint8)
    offsets = np.repeat(np.asarray(starts, np.int64) - (np.cumsum(lengths) - lengths), lengths)
    return buf[offsets + np.arange(total)]


def _window(buf: np.ndarray) -> np.ndarray:
    """Row k: buf[k:k + 8] (a view)."""
    return np.lib.stride_tricks.as_strided(buf, shape=(len(buf) - 7, 8), strides=(1, 1),
                                           writeable=False)


def doubles(buf: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The float64 at each start."""
    return _window(buf)[np.asarray(starts, np.int64)].view("<f8").reshape(-1)


def packed_doubles(buf: np.ndarray, starts, lengths) -> np.ndarray:
    """The values of packed double fields, concatenated."""
    lengths = np.asarray(lengths, np.int64)
    if np.any(lengths % 8):
        raise WireMismatch("packed doubles")
    counts = lengths // 8
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0)
    first = np.asarray(starts, np.int64) - 8 * (np.cumsum(counts) - counts)
    return doubles(buf, np.repeat(first, counts) + 8 * np.arange(total))


def packed_varints(buf: np.ndarray, starts, lengths) -> Tuple[np.ndarray, np.ndarray]:
    """Values of packed varint fields, and how many each range held."""
    data = gather(buf, starts, lengths).astype(np.uint64)
    lengths = np.asarray(lengths, np.int64)
    last = (data & np.uint64(0x80)) == 0
    if len(data) and not last[-1]:
        raise WireMismatch("packed varint truncated")
    if np.all(last):
        values = data
    else:
        group = np.concatenate(([0], np.cumsum(last)[:-1]))
        first = np.concatenate(([True], last[:-1]))
        place = np.arange(len(data)) - np.maximum.accumulate(np.where(first, np.arange(len(data)), 0))
        if np.any(place > 9):
            raise WireMismatch("varint too long")
        parts = (data & np.uint64(0x7F)) << (np.uint64(7) * place.astype(np.uint64))
        values = np.zeros(int(last.sum()), np.uint64)
        np.add.at(values, group, parts)
    # Varints per range: the terminating bytes in each.
    ends = np.cumsum(lengths)
    terminated = np.concatenate(([0], np.cumsum(last)))
    counts = terminated[ends] - terminated[ends - lengths]
    return values, counts


def per_message(fields: Fields, entries: np.ndarray, count: int) -> np.ndarray:
    """How many of `entries` each of `count` messages has."""
    return np.bincount(fields.msg[entries], minlength=count)


def first_per_message(fields: Fields, entries: np.ndarray, count: int) -> np.ndarray:
    """The entry of each message (-1: none); the last one wins, as protobuf
    merges a repeated singular field."""
    out = np.full(count, -1, np.int64)
    out[fields.msg[entries]] = entries
    return out


def _fixed_varints(buf: np.ndarray, pos: np.ndarray, size: int) -> np.ndarray:
    value = np.zeros(len(pos), np.uint64)
    for i in range(size):
        value |= (buf[pos + i] & 0x7F).astype(np.uint64) << np.uint64(7 * i)
    return value


def columns(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, spec: Dict[int, str]) -> dict:
    """Fields of N messages by kind: spec {field: "f8" | "int" | "bytes" |
    "each"}. Returns {field: array} for f8 (float64, 0 when absent) and int
    (int64, 0 when absent; varints), {field: (start, length)} for bytes
    (length-delimited, the last occurrence; length 0 when absent) and
    {field: (message, start, length)} for each (every occurrence of a
    repeated length-delimited field, in message order).

    Messages laid out as the first one (the usual case: the same fields
    with the same sizes) are read at fixed offsets, all at once; the others
    by `scan`.
    """
    starts = np.asarray(starts, np.int64)
    ends = np.asarray(ends, np.int64)
    n = len(starts)
    out: dict = {}
    for field, kind in spec.items():
        if kind == "f8":
            out[field] = np.zeros(n)
        elif kind == "int":
            out[field] = np.zeros(n, np.int64)
        elif kind == "bytes":
            out[field] = (np.zeros(n, np.int64), np.zeros(n, np.int64))
        elif kind == "each":
            out[field] = []
        else:
            raise ValueError(kind)
    if n == 0:
        for field, kind in spec.items():
            if kind == "each":
                empty = np.zeros(0, np.int64)
                out[field] = (empty, empty, empty)
        return out
    want_wire = {"f8": FIXED64, "int": VARINT, "bytes": LENGTH, "each": LENGTH}
    lengths = ends - starts
    # The template: a message of the commonest size.
    sizes, first, times = np.unique(lengths, return_index=True, return_counts=True)
    t0 = starts[first[np.argmax(times)]]
    template = scan_one(buf, int(t0), int(t0 + sizes[np.argmax(times)]))
    count = len(template.field)
    uniform = lengths == sizes[np.argmax(times)]
    tag_at = np.concatenate(([t0], template.start[:-1] + template.length[:-1])) - t0
    value_at = template.start - t0
    # The same tags (and length prefixes) at the same places, and varints
    # of the same sizes: then the same layout.
    check = []
    for k in range(count):
        check.extend(range(tag_at[k], value_at[k]))
    check = np.asarray(check, np.int64)
    rows = np.flatnonzero(uniform)
    uniform[rows] = np.all(buf[starts[rows, None] + check] == buf[t0 + check], axis=1)
    varint_bytes = [np.arange(value_at[k], value_at[k] + template.length[k])
                    for k in range(count) if template.wire[k] == VARINT]
    if varint_bytes:
        body = np.concatenate(varint_bytes)
        rows = np.flatnonzero(uniform)
        uniform[rows] = np.all((buf[starts[rows, None] + body] & 0x80) == (buf[t0 + body] & 0x80), axis=1)
    same = np.flatnonzero(uniform)
    rest = np.flatnonzero(~uniform)
    for field, kind in spec.items():
        hits = [k for k in range(count) if template.field[k] == field]
        if any(template.wire[k] != want_wire[kind] for k in hits):
            raise WireMismatch(f"field {field}: wire type")
        if kind == "each":
            for k in hits:
                out[field].append((same, starts[same] + value_at[k],
                                   np.full(len(same), template.length[k], np.int64)))
            continue
        if not hits:
            continue
        k = hits[-1]
        at = starts[same] + value_at[k]
        if kind == "f8":
            out[field][same] = doubles(buf, at)
        elif kind == "int":
            out[field][same] = _fixed_varints(buf, at, int(template.length[k])).astype(np.int64)
        else:
            out[field][0][same] = at
            out[field][1][same] = template.length[k]
    if len(rest):
        f = scan(buf, starts[rest], ends[rest])
        for field, kind in spec.items():
            hit = f.select(field, want_wire[kind])
            msg = rest[f.msg[hit]]
            if kind == "each":
                out[field].append((msg, f.start[hit], f.length[hit]))
            elif kind == "f8":
                out[field][msg] = doubles(buf, f.start[hit])
            elif kind == "int":
                out[field][msg] = f.value[hit].astype(np.int64)
            else:
                out[field][0][msg] = f.start[hit]
                out[field][1][msg] = f.length[hit]
    for field, kind in spec.items():
        if kind == "each":
            parts = out[field]
            if not parts:
                empty = np.zeros(0, np.int64)
                out[field] = (empty, empty, empty)
                continue
            if len(parts) > 1 or len(rest):
                # Interleave: occurrence order within a message is the
                # order of the parts (template occurrences first, in order).
                msg = np.concatenate([p[0] for p in parts])
                start = np.concatenate([p[1] for p in parts])
                length = np.concatenate([p[2] for p in parts])
                order = np.lexsort((start, msg))
                out[field] = (msg[order], start[order], length[order])
            else:
                out[field] = parts[0]
    return out
