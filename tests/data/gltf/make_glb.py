#!/usr/bin/env python3
"""Packs a .gltf with one external buffer into a .glb (glTF 2.0 section 4,
"GLB File Format Specification"), using only the standard library.

    python3 make_glb.py RiggedFigure.gltf RiggedFigure.glb

The JSON is re-serialised compactly with buffer 0 pointing at the GLB's BIN
chunk (no "uri"); everything else is unchanged. The output is deterministic.
"""
import json
import os
import struct
import sys


def pad(data: bytes, fill: bytes) -> bytes:
    return data + fill * (-len(data) % 4)


def main(src: str, dst: str) -> None:
    with open(src, encoding="utf-8") as f:
        gltf = json.load(f)
    buffers = gltf.get("buffers", [])
    if len(buffers) != 1 or "uri" not in buffers[0]:
        sys.exit(f"{src}: expected exactly one buffer with a uri")
    with open(os.path.join(os.path.dirname(src), buffers[0]["uri"]), "rb") as f:
        binary = f.read()
    if len(binary) != buffers[0]["byteLength"]:
        sys.exit(f"{src}: buffer 0 has {len(binary)} bytes, not byteLength")
    del buffers[0]["uri"]

    json_chunk = pad(json.dumps(gltf, separators=(",", ":")).encode(), b" ")
    bin_chunk = pad(binary, b"\0")
    length = 12 + 8 + len(json_chunk) + 8 + len(bin_chunk)
    with open(dst, "wb") as f:
        f.write(struct.pack("<4sII", b"glTF", 2, length))
        f.write(struct.pack("<II", len(json_chunk), 0x4E4F534A))  # "JSON"
        f.write(json_chunk)
        f.write(struct.pack("<II", len(bin_chunk), 0x004E4942))  # "BIN\0"
        f.write(bin_chunk)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
