"""The package's own PEP 517 build backend: a wheel and an sdist with the
standard library alone, so that pip builds it offline in any environment
(a fresh venv, --user, --target; build isolation installs nothing, since
pyproject.toml requires nothing).

The wheel: the hand-written modules of reach/ and the gRPC stubs that
generate_stubs.py makes with the system protoc and grpc_python_plugin.
The sdist: those sources, this backend and the .proto files (under
proto/), so that it builds where the repository is not.
"""
import base64
import hashlib
import io
import os
import shutil
import sys
import tarfile
import tempfile
import tomllib
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _project():
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _names():
    project = _project()
    name = project["name"]
    return project, name.replace("-", "_"), project["version"]


def _metadata() -> str:
    project = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}",
             f"Summary: {project['description']}", f"Requires-Python: {project['requires-python']}",
             f"License: {project.get('license', {}).get('text', 'UNKNOWN')}"]
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(HERE, project["readme"]), encoding="utf-8") as f:
        readme = f.read()
    return "\n".join(lines) + "\n\n" + readme


def _sources():
    """The hand-written package files, relative to HERE (no stubs)."""
    out = []
    for name in sorted(os.listdir(os.path.join(HERE, "reach"))):
        if name.endswith(".py"):
            out.append(os.path.join("reach", name))
    return out


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _dist_info(name, version):
    return f"{name}-{version}.dist-info"


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _, name, version = _names()
    info = os.path.join(metadata_directory, _dist_info(name, version))
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(info, "WHEEL"), "w") as f:
        f.write(_WHEEL)
    return _dist_info(name, version)


_WHEEL = "Wheel-Version: 1.0\nGenerator: reach_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    sys.path.insert(0, HERE)
    try:
        import generate_stubs
    finally:
        sys.path.pop(0)
    _, name, version = _names()
    info = _dist_info(name, version)
    files = {}
    for path in _sources():
        with open(os.path.join(HERE, path), "rb") as f:
            files[path.replace(os.sep, "/")] = f.read()
    with tempfile.TemporaryDirectory() as staging:
        generate_stubs.generate(staging)
        for root, _, names in os.walk(staging):
            for file in names:
                if file.endswith(".py"):
                    full = os.path.join(root, file)
                    with open(full, "rb") as f:
                        files[os.path.relpath(full, staging).replace(os.sep, "/")] = f.read()
    files[f"{info}/METADATA"] = _metadata().encode()
    files[f"{info}/WHEEL"] = _WHEEL.encode()
    files[f"{info}/top_level.txt"] = b"reach\n"
    record = [_record_line(path, data) for path, data in sorted(files.items())]
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel_name = f"{name}-{version}-py3-none-any.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(files):
            if not path.endswith("/RECORD"):
                z.writestr(_zipinfo(path), files[path])
        z.writestr(_zipinfo(f"{info}/RECORD"), files[f"{info}/RECORD"])
    return wheel_name


def _zipinfo(path):
    info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _proto_dir():
    sys.path.insert(0, HERE)
    try:
        import generate_stubs
    finally:
        sys.path.pop(0)
    return generate_stubs.proto_dir()


def build_sdist(sdist_directory, config_settings=None):
    _, name, version = _names()
    top = f"{name}-{version}"
    protos = _proto_dir()
    entries = [(os.path.join(HERE, p), p) for p in
               ["pyproject.toml", "reach_build.py", "generate_stubs.py", "README.md"] + _sources()]
    for proto in sorted(os.listdir(os.path.join(protos, "reach", "v1"))):
        if proto.endswith(".proto"):
            entries.append((os.path.join(protos, "reach", "v1", proto), os.path.join("proto", "reach", "v1", proto)))
    entries.append((os.path.join(protos, "grpc", "health", "v1", "health.proto"),
                    os.path.join("proto", "grpc", "health", "v1", "health.proto")))
    os.makedirs(sdist_directory, exist_ok=True)
    archive = f"{top}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, archive), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for source, path in entries:
            tar.add(source, arcname=f"{top}/{path}", filter=_clean)
        data = _metadata().encode()
        info = tarfile.TarInfo(f"{top}/PKG-INFO")
        info.size, info.mode, info.mtime = len(data), 0o644, 1577836800
        tar.addfile(info, io.BytesIO(data))
    return archive


def _clean(info):
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 1577836800
    info.mode = 0o644
    return info
