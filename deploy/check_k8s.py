#!/usr/bin/env python3
"""Offline checks of the Kubernetes examples (no kubectl needed).

Builds each kustomization the way kustomize does for what these use
(resources, files or directories; namespace; inline JSON 6902 patches
with add and replace) and checks the references between the objects:
every Service selects the pods of some workload and its targetPorts name
ports those pods declare; every Secret a pod reads (volume, secretKeyRef)
is one deploy/README.md tells how to create; every volumeMount names a
volume or volumeClaimTemplate; a StatefulSet's serviceName is a headless
Service; probes are set; NetworkPolicies select existing pods. For
deploy/k8s-postgres also: the Deployment has at least 2 replicas and takes
--registry from a Secret through its environment (--fromenv=registry,
FLAGS_registry), with no postgresql:// URL in any manifest, and the
database's password file lies in a mounted Secret.

    check_k8s.py [KUSTOMIZATION_DIR ...]   (default: every deploy/k8s*)
"""
import copy
import glob
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def load(directory):
    """The objects a kustomization renders (the subset used here)."""
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    objects = []
    for resource in k.get("resources", []):
        path = os.path.normpath(os.path.join(directory, resource))
        if os.path.isdir(path):
            objects += load(path)
        else:
            with open(path) as f:
                objects += [o for o in yaml.safe_load_all(f) if o]
    for o in objects:
        if "namespace" in k and o["kind"] != "Namespace":
            o["metadata"]["namespace"] = k["namespace"]
    for patch in k.get("patches", []):
        target = patch["target"]
        ops = yaml.safe_load(patch["patch"])
        hits = [o for o in objects if o["kind"] == target["kind"]
                and o["metadata"]["name"] == target["name"]]
        if len(hits) != 1:
            raise SystemExit(f"{directory}: patch target {target} matches {len(hits)} objects")
        for op in ops:
            apply(hits[0], op, directory)
    return objects


def apply(obj, op, where):
    keys = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
    parent = obj
    for key in keys[:-1]:
        parent = parent[int(key)] if isinstance(parent, list) else parent[key]
    last = keys[-1]
    if op["op"] == "add":
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(op["value"]))
        else:
            parent[last] = copy.deepcopy(op["value"])
    elif op["op"] == "replace":
        if isinstance(parent, list):
            parent[int(last)] = copy.deepcopy(op["value"])
        elif last not in parent:
            raise SystemExit(f"{where}: replace of missing {op['path']}")
        else:
            parent[last] = copy.deepcopy(op["value"])
    else:
        raise SystemExit(f"{where}: patch op {op['op']} not supported here")


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check(directory, readme):
    problems = []
    objects = load(directory)
    name = os.path.relpath(directory, os.path.dirname(HERE))
    workloads = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")]
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    secrets_documented = set(re.findall(r"create secret (?:generic|tls) ([a-z0-9-]+)", readme))
    for o in objects:
        for key in ("apiVersion", "kind"):
            if key not in o:
                problems.append(f"an object without {key}")
    for w in workloads:
        wname = f"{w['kind']} {w['metadata']['name']}"
        pod = w["spec"]["template"]
        if not selects(w["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"]):
            problems.append(f"{wname}: its selector does not select its own pods")
        volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
        claims = {c["metadata"]["name"] for c in w["spec"].get("volumeClaimTemplates", [])}
        for v in volumes.values():
            if "secret" in v and v["secret"]["secretName"] not in secrets_documented:
                problems.append(f"{wname}: Secret {v['secret']['secretName']} (volume) is not "
                                "created anywhere in deploy/README.md")
        for c in pod["spec"]["containers"]:
            for probe in ("readinessProbe", "livenessProbe"):
                if probe not in c:
                    problems.append(f"{wname}: container {c['name']} has no {probe}")
            for m in c.get("volumeMounts", []):
                if m["name"] not in volumes and m["name"] not in claims:
                    problems.append(f"{wname}: volumeMount {m['name']} names no volume")
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref and ref["name"] not in secrets_documented:
                    problems.append(f"{wname}: Secret {ref['name']} (env {e['name']}) is not "
                                    "created anywhere in deploy/README.md")
            text = yaml.safe_dump(c)
            if "postgresql://" in text or "postgres://" in text:
                problems.append(f"{wname}: a database URL in the manifest")
        if w["kind"] == "StatefulSet":
            svc = services.get(w["spec"].get("serviceName"))
            if svc is None:
                problems.append(f"{wname}: serviceName {w['spec'].get('serviceName')} is no Service")
            elif svc["spec"].get("clusterIP") != "None":
                problems.append(f"{wname}: Service {svc['metadata']['name']} is not headless")
            if not claims:
                problems.append(f"{wname}: no volumeClaimTemplates (its data would not persist)")
    for svc in services.values():
        pods = [w for w in workloads
                if selects(svc["spec"].get("selector"), w["spec"]["template"]["metadata"]["labels"])]
        if not pods:
            problems.append(f"Service {svc['metadata']['name']} selects no workload's pods")
            continue
        declared = {p.get("name") for w in pods for c in w["spec"]["template"]["spec"]["containers"]
                    for p in c.get("ports", [])}
        for port in svc["spec"]["ports"]:
            target = port.get("targetPort")
            if isinstance(target, str) and target not in declared:
                problems.append(f"Service {svc['metadata']['name']}: targetPort {target} is no "
                                "container port of its pods")
    for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
        if not any(selects(policy["spec"]["podSelector"]["matchLabels"],
                           w["spec"]["template"]["metadata"]["labels"]) for w in workloads):
            problems.append(f"NetworkPolicy {policy['metadata']['name']} selects no pods")
    if os.path.basename(directory) == "k8s-postgres":
        reach = next((w for w in workloads if w["metadata"]["name"] == "reach-server"), None)
        if reach is None:
            problems.append("no reach-server Deployment")
        else:
            c = reach["spec"]["template"]["spec"]["containers"][0]
            if reach["spec"].get("replicas", 1) < 2:
                problems.append("reach-server: fewer than 2 replicas")
            if "--fromenv=registry" not in c.get("args", []):
                problems.append("reach-server: no --fromenv=registry")
            env = {e["name"]: e for e in c.get("env", [])}
            if "secretKeyRef" not in env.get("FLAGS_registry", {}).get("valueFrom", {}):
                problems.append("reach-server: FLAGS_registry does not come from a Secret")
        pg = next((w for w in workloads if w["kind"] == "StatefulSet"), None)
        if pg is None:
            problems.append("no PostgreSQL StatefulSet")
        else:
            c = pg["spec"]["template"]["spec"]["containers"][0]
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            password = env.get("POSTGRES_PASSWORD_FILE", "")
            volumes = {v["name"]: v for v in pg["spec"]["template"]["spec"]["volumes"]}
            if not any(password.startswith(m["mountPath"] + "/") and
                       "secret" in volumes.get(m["name"], {}) for m in c["volumeMounts"]):
                problems.append("postgres: POSTGRES_PASSWORD_FILE is not in a mounted Secret")
    for p in problems:
        print(f"{name}: {p}")
    kinds = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objects)
    if not problems:
        print(f"OK: {name}: {len(objects)} objects ({', '.join(kinds)})")
    return not problems


def main():
    dirs = sys.argv[1:] or sorted(d for d in glob.glob(os.path.join(HERE, "k8s*"))
                                  if os.path.exists(os.path.join(d, "kustomization.yaml")))
    with open(os.path.join(HERE, "README.md")) as f:
        readme = f.read()
    ok = all([check(os.path.abspath(d), readme) for d in dirs])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
