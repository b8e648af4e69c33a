#!/usr/bin/env python3
"""CTest docs.readme_tour: the README's five-minute tour, run as written.

  readme_tour.py --server REACH_SERVER --repo SOURCE_DIR --build BUILD_DIR

Every ```sh and ```python block of README.md's "A five-minute tour"
section runs, in order, in one bash script (a python block as
`python3 - <<EOF`), from a directory laid out as the repository (its
examples/, tests/, proto/ and client/python linked, build/ the build tree)
so files the tour writes land there. A real reach-server on loopback ports
stands in for scripts/run's: the tour reaches it through $REACH_ADDRESS and
$REACH_URL, as the README says. Debian's python3 and pip, offline, with a
HOME of the test's own (the tour installs the Python client with --user).

Then, independently of what the tour printed: the server's own registry
holds what the tour registered (so the tour called this server), the
viewer's /api/streams listed the tour's solve and retarget streams while
they ran (what the tour tells the reader to click), the viewer's page
answers, the files the tour wrote are there, and the server drains and
exits 0.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def tour_blocks(readme):
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    start = text.index("\n## A five-minute tour")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end >= 0 else len(text)]
    return re.findall(r"^```(sh|python)\n(.*?)^```", section, re.M | re.S)


def start_server(binary, log_path):
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [binary, "--in_memory", "--listen=127.0.0.1:0", "--http_listen=127.0.0.1:0",
         "--metrics_listen=127.0.0.1:0"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(log_path) as f:
            started = f.read()
        grpc = re.search(r"listening on \S+ \(port (\d+)\)", started)
        http = re.search(r"viewer on http://\S+ \(port (\d+)\)", started)
        if grpc and http:
            return proc, int(grpc.group(1)), int(http.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    sys.exit(f"reach-server did not start:\n{started}")


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.status, answer.read()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    args.repo = os.path.realpath(args.repo)

    blocks = tour_blocks(os.path.join(args.repo, "README.md"))
    kinds = [kind for kind, _ in blocks]
    check("sh" in kinds and "python" in kinds,
          f"README: the tour has shell and Python blocks ({len(blocks)} blocks)")
    script = ""
    for kind, code in blocks:
        if kind == "sh":
            script += code
        else:
            script += "python3 - <<'REACH_TOUR_PYTHON'\n" + code + "REACH_TOUR_PYTHON\n"
    for needed in ("build/client/reach", "import reach", "--live", "curl"):
        check(needed in script, f"README: the tour runs {needed}")

    work = tempfile.mkdtemp(prefix="reach_tour_")
    os.makedirs(os.path.join(work, "home"))
    os.makedirs(os.path.join(work, "client"))
    for name in ("examples", "tests", "proto"):
        os.symlink(os.path.join(args.repo, name), os.path.join(work, name))
    os.symlink(os.path.join(args.repo, "client", "python"), os.path.join(work, "client", "python"))
    os.symlink(os.path.realpath(args.build), os.path.join(work, "build"))

    server, grpc_port, http_port = start_server(args.server, os.path.join(work, "server.log"))
    url = f"http://127.0.0.1:{http_port}"
    address = f"127.0.0.1:{grpc_port}"

    # The viewer's list of streams, polled while the tour runs.
    seen, stop = {}, threading.Event()

    def poll_streams():
        while not stop.is_set():
            try:
                _, body = get(url + "/api/streams", timeout=2)
                for stream in json.loads(body)["streams"]:
                    seen.setdefault(stream["kind"], stream)
            except OSError:
                pass
            stop.wait(0.1)

    poller = threading.Thread(target=poll_streams)
    poller.start()

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONUSERBASE", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(
        # Debian's python3 first (the tour is for Debian 12), pip offline.
        PATH="/usr/bin:/bin:" + os.environ.get("PATH", ""),
        HOME=os.path.join(work, "home"), PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1", http_proxy="http://127.0.0.1:9",
        https_proxy="http://127.0.0.1:9", no_proxy="127.0.0.1,localhost",
        PYTHONDONTWRITEBYTECODE="1", REACH_ADDRESS=address, REACH_URL=url)
    print("---- the tour\n" + script + "----", flush=True)
    started = time.time()
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                              capture_output=True, text=True, timeout=420)
        out, code = done.stdout, done.returncode
        print(out + done.stderr)
    except subprocess.TimeoutExpired as e:
        out, code = (e.stdout or b"").decode(), -1
    stop.set()
    poller.join()
    check(code == 0, f"the tour ran to its end, exit {code} ({time.time() - started:.0f} s)")

    # The tour's claims, checked on the server it called.
    reach = os.path.join(args.build, "client", "reach")

    def listed(*command):
        answer = subprocess.run([reach, "--addr", address, *command, "--json"],
                                capture_output=True, text=True, timeout=30)
        return json.loads(answer.stdout or "{}")

    names = [s["name"] for s in listed("list").get("skeletons", [])]
    check(any(n.startswith("demo humanoid") for n in names),
          f"the humanoid the tour registered is in this server's registry ({names})")
    check(any("walk" in n for n in names) and any("BCN" in n for n in names),
          "the walk and the BCN rig the tour imported are there too")
    check(len(listed("profiles", "list").get("profiles", [])) >= 1,
          "the retarget profile the tour made is there")
    check("solve" in seen and "retarget" in seen,
          f"the viewer listed the tour's streams while they ran ({sorted(seen)})")
    status, page = get(url + "/")
    check(status == 200 and b"<html" in page.lower(), "the viewer's page answers")
    check(re.search(r"^True \[", out, re.M) is not None and "240 of 240 frames reached" in out,
          "the Python example solved and streamed every frame")
    check("5 of 5 goals reached" in out, "the full-body solve reached every goal")
    for name, magic in (("walk.solved.bvh", b"HIERARCHY"), ("walk_bcn.glb", b"glTF")):
        path = os.path.join(work, name)
        with open(path, "rb") if os.path.exists(path) else open(os.devnull, "rb") as f:
            check(f.read(len(magic)) == magic, f"the tour wrote {name}")
    curl = [line for line in out.splitlines() if line.startswith('{"skeletons"')]
    check(bool(curl) and len(json.loads(curl[-1])["skeletons"]) == len(names),
          "the HTTP API lists the same registry")

    server.send_signal(signal.SIGTERM)
    check(server.wait(timeout=30) == 0, "the server drained and exited 0")
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"the tour's directory and the server's log: {work}")
    print("PASS" if not failures else f"{len(failures)} FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
