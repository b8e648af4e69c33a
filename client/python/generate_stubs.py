#!/usr/bin/python3
"""Generates the gRPC Python stubs of Reach's protos into a package tree.

    generate_stubs.py OUT_DIR [PROTO_DIR]

Writes OUT_DIR/reach/v1/{skeleton,solve,ik_service,retarget}_pb2(_grpc).py and
OUT_DIR/reach/_health/health_pb2(_grpc).py (the
standard grpc.health.v1 service, kept out of the `grpc` package's name).
Uses the system `protoc` and `grpc_python_plugin` (Debian's
protobuf-compiler and protobuf-compiler-grpc): Debian's python3-grpc-tools
is too old for proto3 `optional`. PROTO_DIR: see proto_dir(). The stubs are
never checked in.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def proto_dir():
    """$REACH_PROTO_DIR, else proto/ beside this file (an sdist), else the
    repository's proto/."""
    for candidate in (os.environ.get("REACH_PROTO_DIR"), os.path.join(HERE, "proto"),
                      os.path.join(HERE, "..", "..", "proto")):
        if candidate and os.path.isdir(os.path.join(candidate, "reach", "v1")):
            return os.path.abspath(candidate)
    raise SystemExit("generate_stubs: no proto/ directory with reach/v1 (set REACH_PROTO_DIR "
                     "to the repository's proto/)")


def generate(out_dir, proto_dir=None):
    proto_dir = os.path.abspath(proto_dir or globals()["proto_dir"]())
    out_dir = os.path.abspath(out_dir)
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if protoc is None or plugin is None:
        raise SystemExit("generate_stubs: needs protoc and grpc_python_plugin "
                         "(apt-get install protobuf-compiler protobuf-compiler-grpc)")
    reach_protos = [os.path.join("reach", "v1", f"{name}.proto")
                    for name in ("skeleton", "solve", "ik_service", "retarget")]
    for proto in reach_protos:
        if not os.path.exists(os.path.join(proto_dir, proto)):
            raise SystemExit(f"generate_stubs: {os.path.join(proto_dir, proto)} is missing "
                             "(set REACH_PROTO_DIR to the repository's proto/)")
    os.makedirs(out_dir, exist_ok=True)
    common = [protoc, f"--plugin=protoc-gen-grpc_python={plugin}",
              f"--python_out={out_dir}", f"--grpc_python_out={out_dir}"]
    subprocess.run(common + [f"-I{proto_dir}"] + reach_protos, check=True)
    # health.proto under reach/_health/, so its module is reach._health.
    with tempfile.TemporaryDirectory() as staging:
        health_dir = os.path.join(staging, "reach", "_health")
        os.makedirs(health_dir)
        shutil.copy(os.path.join(proto_dir, "grpc", "health", "v1", "health.proto"),
                    os.path.join(health_dir, "health.proto"))
        subprocess.run(common + [f"-I{staging}", os.path.join("reach", "_health", "health.proto")],
                       check=True, cwd=staging)
    for package in ("v1", "_health"):
        init = os.path.join(out_dir, "reach", package, "__init__.py")
        if not os.path.exists(init):
            open(init, "w").close()


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    generate(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None)
