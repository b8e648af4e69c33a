#!/usr/bin/env python3
"""Writes the vmc_osc fuzz target's seed inputs (tests/fuzz/corpus/vmc_osc/
seed-*): VMC packets as senders make them (a frame bundle, a nested bundle,
lone messages, trackers, blend shapes, v2.1's longer Root/Pos) and a few
datagrams in one input, separated by "\\n--\\n" as the target splits them.
Run by scripts/fuzz --seed."""
import os
import struct
import sys

def pad(b):
    return b + b"\0" * (4 - len(b) % 4)

def message(address, *args):
    tags, data = ",", b""
    for a in args:
        if isinstance(a, str):
            tags += "s"; data += pad(a.encode())
        elif isinstance(a, float):
            tags += "f"; data += struct.pack(">f", a)
        else:
            tags += "i"; data += struct.pack(">i", a)
    return pad(address.encode()) + pad(tags.encode()) + data

def bundle(*elements):
    out = b"#bundle\0" + struct.pack(">II", 0, 1)
    for e in elements:
        out += struct.pack(">i", len(e)) + e
    return out

BONES = ["Hips", "Spine", "Chest", "Neck", "Head", "LeftUpperArm",
         "LeftLowerArm", "LeftHand", "LeftUpperLeg", "LeftLowerLeg",
         "LeftFoot", "RightHand", "Jaw"]

def frame(t, turn=0.0):
    msgs = [message("/VMC/Ext/OK", 1), message("/VMC/Ext/T", t),
            message("/VMC/Ext/Root/Pos", "root", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)]
    for i, name in enumerate(BONES):
        p = (0.0, 0.95, 0.0) if name == "Hips" else (0.0, 0.1, 0.0)
        msgs.append(message("/VMC/Ext/Bone/Pos", name, *p, turn * i, 0.0, 0.0, 1.0))
    return bundle(*msgs)

out = sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus/vmc_osc"
os.makedirs(out, exist_ok=True)
seeds = {
    "frame": frame(0.5, 0.1),
    "nested": bundle(message("/VMC/Ext/OK", 1, 0, 0), bundle(frame(1.0))),
    "lone-bone": message("/VMC/Ext/Bone/Pos", "Head", 0.0, 0.1, 0.0, 0.0, 0.7071, 0.0, 0.7071),
    "root-v21": message("/VMC/Ext/Root/Pos", "root", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0,
                        1.0, 1.0, 1.0, 0.0, 0.0, 0.0),
    "trackers": bundle(message("/VMC/Ext/Tra/Pos", "LHR-1", 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0),
                       message("/VMC/Ext/Hmd/Pos", "HMD", 0.0, 1.6, 0.0, 0.0, 0.0, 0.0, 1.0),
                       message("/VMC/Ext/Con/Pos", "CTRL", 0.3, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0),
                       message("/VMC/Ext/Blend/Val", "Joy", 0.5),
                       message("/VMC/Ext/Blend/Apply")),
    "stream": b"\n--\n".join([frame(0.0), frame(1 / 60, 0.2), frame(0.5 / 60),
                              frame(5 / 60, 0.3), message("/VMC/Ext/T", 6 / 60)]),
}
for name, data in seeds.items():
    with open(os.path.join(out, "seed-" + name), "wb") as f:
        f.write(data)
