#!/usr/bin/python3
"""The dashboards and alert rules against the real thing.

Starts reach-server and Debian's Prometheus on loopback, the server with
token authentication (so Prometheus scrapes with basic auth, as in the
compose stack), Prometheus with the repo's deploy/prometheus/prometheus.yml
(targets, intervals and the password file rewritten for the test), drives
load with `reach bench` (solve, batch, stream) plus a few
failing calls, waits for Prometheus to scrape it, then evaluates every
PromQL expression of the Grafana dashboard and of the alert rules through
Prometheus' HTTP API (deploy/check_dashboards.py exprs): an expression that
errors, names a metric the server does not export, or (for a panel that
should have data under load) returns nothing fails the test.

    deploy/observability_test.py BUILD_DIR
"""
import hashlib
import json
import os
import secrets
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

DEPLOY = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, predicate, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise SystemExit(f"observability_test: timed out waiting for {what}")


def query(prometheus, expr):
    url = prometheus + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)["data"]["result"]


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    build = os.path.abspath(sys.argv[1])
    server_bin = os.path.join(build, "server", "reach-server")
    reach_bin = os.path.join(build, "client", "reach")
    prometheus_bin = shutil.which("prometheus")
    if prometheus_bin is None:
        raise SystemExit("observability_test: Debian's prometheus is not installed (scripts/setup)")
    work = tempfile.mkdtemp(prefix="reach-observability-")
    processes = []
    try:
        # The server, on ports the kernel picks; its start line names them.
        log_path = os.path.join(work, "server.log")
        log = open(log_path, "w")
        # Tokens: an admin for the load, the scraper with the metrics role.
        tokens = {"admin": secrets.token_hex(32), "prometheus": secrets.token_hex(32)}
        with open(os.path.join(work, "tokens"), "w") as f:
            for name, role in (("admin", "admin"), ("prometheus", "metrics")):
                digest = hashlib.sha256(tokens[name].encode()).hexdigest()
                f.write(f"{name} {digest} {role}\n")
        password_file = os.path.join(work, "prometheus.token")
        with open(password_file, "w") as f:
            f.write(tokens["prometheus"])
        server = subprocess.Popen(
            [server_bin, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0", "--http_listen=",
             "--in_memory", f"--auth_tokens_file={os.path.join(work, 'tokens')}"],
            stderr=log, stdout=log)
        processes.append(server)

        def ports():
            text = open(log_path).read()
            m = re.search(r"listening on \S+ \(port (\d+)\); metrics on \S+ \(port (\d+)\)", text)
            return m and (int(m.group(1)), int(m.group(2)))
        grpc_port, metrics_port = wait_for("reach-server's start line", ports)
        addr = f"127.0.0.1:{grpc_port}"

        # Prometheus with the repo's config: the reach job pointed at this
        # server, 1 s intervals, the rule file by absolute path.
        with open(os.path.join(DEPLOY, "prometheus", "prometheus.yml")) as f:
            config = yaml.safe_load(f)
        config["global"]["scrape_interval"] = "1s"
        config["global"]["evaluation_interval"] = "1s"
        config["global"]["scrape_timeout"] = "1s"
        config["rule_files"] = [os.path.join(DEPLOY, "prometheus", r)
                                for r in config.get("rule_files", [])]
        prometheus_port = free_port()
        jobs = {job["job_name"]: job for job in config["scrape_configs"]}
        if "reach" not in jobs:
            raise SystemExit("observability_test: prometheus.yml has no 'reach' job")
        for job in config["scrape_configs"]:
            job.pop("scrape_interval", None)
            job.pop("scrape_timeout", None)
            if job["job_name"] == "reach":
                job["static_configs"] = [{"targets": [f"127.0.0.1:{metrics_port}"]}]
                if job.get("basic_auth", {}).get("username") != "prometheus":
                    raise SystemExit("observability_test: the reach job has no "
                                     "basic_auth for user prometheus")
                job["basic_auth"]["password_file"] = password_file
            else:
                job["static_configs"] = [{"targets": [f"127.0.0.1:{prometheus_port}"]}]
        config_path = os.path.join(work, "prometheus.yml")
        with open(config_path, "w") as f:
            yaml.safe_dump(config, f)
        subprocess.run(["promtool", "check", "config", config_path], check=True,
                       stdout=subprocess.DEVNULL)
        prometheus = subprocess.Popen(
            [prometheus_bin, f"--config.file={config_path}",
             f"--storage.tsdb.path={os.path.join(work, 'tsdb')}",
             f"--web.listen-address=127.0.0.1:{prometheus_port}"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "prometheus.log"), "w"))
        processes.append(prometheus)
        url = f"http://127.0.0.1:{prometheus_port}"

        def target_up():
            try:
                return any(s["value"][1] == "1" for s in query(url, 'up{job="reach"}'))
            except OSError:
                return False
        wait_for("Prometheus to scrape reach-server", target_up)
        # ... with its password: without one, /metrics answers 401.
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
            raise SystemExit("observability_test: /metrics answered without basic auth")
        except urllib.error.HTTPError as e:
            if e.code != 401:
                raise SystemExit(f"observability_test: /metrics without auth: {e.code}, not 401")

        # Load: every RPC kind, a latest-wins stream, and some failures.
        reach = [reach_bin, f"--addr={addr}", f"--token={tokens['admin']}"]
        for args in (["bench", "--rpc=solve", "--duration=3", "--concurrency=2"],
                     ["bench", "--rpc=batch", "--duration=3", "--batch-size=50"],
                     ["bench", "--rpc=stream", "--duration=3", "--concurrency=2"]):
            subprocess.run(reach + args, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(reach + ["stream", "--max-rate", "--latest-wins", "--quiet",
                                os.path.join(DEPLOY, "..", "tests", "data", "mocap",
                                             "cmu_141_16_wave.bvh")],
                       check=True, stdout=subprocess.DEVNULL)
        for _ in range(5):
            subprocess.run(reach + ["solve", "--skeleton=unknown", "--chain=arm",
                                    "--target=1,2,3"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)

        # Two scrapes after the load, so rate() sees it.
        def scraped_load():
            result = query(url, 'sum(grpc_server_handled_total{job="reach",grpc_method="SolveStream"})')
            return result and float(result[0]["value"][1]) > 0
        wait_for("the load to reach Prometheus", scraped_load)
        time.sleep(3)

        check = [sys.executable, os.path.join(DEPLOY, "check_dashboards.py")]
        subprocess.run(check + ["structure"], check=True)
        result = subprocess.run(check + ["exprs", "--prometheus", url])
        return result.returncode
    finally:
        for p in reversed(processes):
            p.send_signal(signal.SIGTERM)
        for p in reversed(processes):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
