#!/usr/bin/env python3
"""Checks the Grafana dashboard and Prometheus alerts of deploy/.

  check_dashboards.py structure [--dashboard PATH]
      Validates the dashboard JSON (top-level keys, panels, grid layout,
      datasource references, targets, template variables) against the
      Grafana provisioning files.

  check_dashboards.py exprs --prometheus URL [--min-data-fraction F]
      Runs every dashboard `expr` (with $instance -> .* and
      $__rate_interval -> 1m) and every alert `expr` of alerts.yml against a
      live Prometheus, and fails on query errors, on metric names Prometheus
      has never seen, and on dashboard expressions without data (except the
      panels in MAY_BE_EMPTY). Run it while reach-server is under load or
      within a minute after (rates use a 1m window, and the latency and
      ratio panels are empty while their rate window holds no traffic).
      --allow-missing-metric NAME tolerates a metric an older server build
      does not export yet.

Standard library plus PyYAML (Debian: python3-yaml). Exit status 0 when
every check passes, 1 when one fails, 2 on bad usage or unreadable files.
"""

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

try:
    import yaml
except ImportError:  # pragma: no cover
    print("check_dashboards.py: needs PyYAML (apt-get install python3-yaml)",
          file=sys.stderr)
    sys.exit(2)

DEPLOY = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DASHBOARD = os.path.join(DEPLOY, "grafana", "dashboards", "reach.json")
DEFAULT_DATASOURCES = os.path.join(
    DEPLOY, "grafana", "provisioning", "datasources", "prometheus.yml")
DEFAULT_PROVIDERS = os.path.join(
    DEPLOY, "grafana", "provisioning", "dashboards", "reach.yml")
DEFAULT_ALERTS = os.path.join(DEPLOY, "prometheus", "alerts.yml")

# Where the compose file mounts deploy/grafana/dashboards in the Grafana
# container: a provider's options.path maps back to this repository folder.
CONTAINER_DASHBOARD_DIRS = {
    "/var/lib/grafana/dashboards": os.path.join(DEPLOY, "grafana", "dashboards"),
}

GRID_WIDTH = 24
PANEL_TYPES = {
    "row", "timeseries", "stat", "gauge", "bargauge", "table", "text",
    "heatmap", "histogram", "piechart", "state-timeline", "status-history",
    "barchart", "logs",
}
# Panel types without queries.
NO_TARGET_TYPES = {"row", "text"}
REQUIRED_TOP_LEVEL = {
    "uid": str, "title": str, "schemaVersion": int, "panels": list,
    "templating": dict, "time": dict,
}
UID_RE = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
VARIABLE_TYPES = {
    "query", "custom", "constant", "datasource", "interval", "textbox",
    "adhoc",
}
# Variables the exprs check knows how to substitute. Dashboards may use only
# these (plus their own template variables, which must be among them).
SUBSTITUTIONS = {"instance": ".*", "__rate_interval": "1m"}
VAR_RE = re.compile(
    r"\$\{(\w+)(?::\w+)?\}"   # ${name} or ${name:format}
    r"|\[\[(\w+)(?::\w+)?\]\]"  # [[name]] (deprecated)
    r"|\$(\w+)")             # $name

# Dashboard panels (by title) whose queries may legitimately return no
# series even under load: ratios guarded against 0/0, which are empty while
# their denominator (traffic of that kind in the rate window) is zero.
MAY_BE_EMPTY = {
    "Error ratio",
    "Error ratio by method",
    "Unreached goal ratio by solver",
}

# Identifiers that name a metric this project exports or Prometheus adds.
METRIC_RE = re.compile(r"^(grpc_|reach_|process_)\w*$|^up$")


class Problems:
    def __init__(self):
        self.items = []

    def add(self, where, message):
        self.items.append("%s: %s" % (where, message))

    def report(self, what):
        if not self.items:
            print("OK: %s" % what)
            return 0
        for item in self.items:
            print("FAIL: %s" % item)
        print("%d problem(s) checking %s" % (len(self.items), what))
        return 1


def display(path):
    """path relative to the repository when inside it."""
    repo = os.path.dirname(DEPLOY)
    path = os.path.abspath(path)
    return os.path.relpath(path, repo) if path.startswith(repo + os.sep) else path


def fatal(message):
    print("check_dashboards.py: %s" % message, file=sys.stderr)
    sys.exit(2)


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fatal("cannot read %s: %s" % (path, e))


def load_yaml(path):
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        fatal("cannot read %s: %s" % (path, e))


def panel_name(panel, index):
    return "panel %r (id %s, #%d)" % (
        panel.get("title", "<untitled>") if isinstance(panel, dict) else "?",
        panel.get("id", "?") if isinstance(panel, dict) else "?", index)


def iter_panels(panels):
    """Top-level panels and the panels of collapsed rows, in order."""
    for panel in panels:
        yield panel
        if isinstance(panel, dict) and panel.get("type") == "row":
            for child in panel.get("panels") or []:
                yield child


def used_variables(expr):
    for m in VAR_RE.finditer(expr):
        yield m.group(1) or m.group(2) or m.group(3)


# --------------------------------------------------------------------------
# structure


def provisioned_datasource_uid(path, problems):
    doc = load_yaml(path)
    where = display(path)
    if not isinstance(doc, dict) or doc.get("apiVersion") != 1:
        problems.add(where, "needs apiVersion: 1")
        return None
    sources = doc.get("datasources")
    if not isinstance(sources, list) or not sources:
        problems.add(where, "needs a non-empty datasources list")
        return None
    uid = None
    defaults = 0
    for i, ds in enumerate(sources):
        name = "%s datasource #%d" % (where, i)
        if not isinstance(ds, dict):
            problems.add(name, "is not a mapping")
            continue
        for key in ("name", "uid", "type", "url"):
            if not isinstance(ds.get(key), str) or not ds.get(key):
                problems.add(name, "missing %s" % key)
        if ds.get("isDefault"):
            defaults += 1
        if ds.get("type") == "prometheus" and uid is None:
            uid = ds.get("uid")
    if defaults > 1:
        problems.add(where, "%d datasources are isDefault" % defaults)
    if uid is None:
        problems.add(where, "no datasource of type prometheus with a uid")
    return uid


def check_providers(path, problems):
    doc = load_yaml(path)
    where = display(path)
    if not isinstance(doc, dict) or doc.get("apiVersion") != 1:
        problems.add(where, "needs apiVersion: 1")
        return
    providers = doc.get("providers")
    if not isinstance(providers, list) or not providers:
        problems.add(where, "needs a non-empty providers list")
        return
    loaded = set()
    for i, p in enumerate(providers):
        name = "%s provider #%d" % (where, i)
        if not isinstance(p, dict):
            problems.add(name, "is not a mapping")
            continue
        if not p.get("name"):
            problems.add(name, "missing name")
        if p.get("type", "file") != "file":
            problems.add(name, "type must be file")
        options = p.get("options") or {}
        container_path = options.get("path") if isinstance(options, dict) else None
        if not container_path:
            problems.add(name, "missing options.path")
            continue
        local = CONTAINER_DASHBOARD_DIRS.get(container_path.rstrip("/"))
        if local is None:
            problems.add(name, "options.path %s is not one of the mounted "
                         "dashboard directories %s" % (
                             container_path, sorted(CONTAINER_DASHBOARD_DIRS)))
            continue
        if not os.path.isdir(local):
            problems.add(name, "%s (mounted at %s) does not exist" % (
                display(local), container_path))
            continue
        jsons = [f for f in os.listdir(local) if f.endswith(".json")]
        if not jsons:
            problems.add(name, "%s holds no dashboard JSON" %
                         display(local))
        loaded.add(os.path.normpath(local))
    # The repository's dashboard must exist where a provider loads it from.
    if not os.path.isfile(DEFAULT_DASHBOARD):
        problems.add(where, "%s does not exist" % display(DEFAULT_DASHBOARD))
    elif os.path.dirname(DEFAULT_DASHBOARD) not in loaded:
        problems.add(where, "no provider loads %s" % display(DEFAULT_DASHBOARD))


def check_datasource_ref(ref, uid, where, problems):
    if not isinstance(ref, dict):
        problems.add(where, "datasource must be {\"type\": \"prometheus\", "
                     "\"uid\": %r}, got %r" % (uid, ref))
        return
    if ref.get("type") != "prometheus":
        problems.add(where, "datasource type %r is not prometheus" % ref.get("type"))
    if uid is not None and ref.get("uid") != uid:
        problems.add(where, "datasource uid %r is not the provisioned uid %r"
                     % (ref.get("uid"), uid))


def check_grid(panels, problems, scope):
    boxes = []
    for index, panel in enumerate(panels):
        if not isinstance(panel, dict):
            continue
        where = "%s%s" % (scope, panel_name(panel, index))
        gp = panel.get("gridPos")
        if not isinstance(gp, dict):
            problems.add(where, "missing gridPos")
            continue
        vals = {}
        for key in ("x", "y", "w", "h"):
            v = gp.get(key)
            if not isinstance(v, int) or isinstance(v, bool):
                problems.add(where, "gridPos.%s must be an integer, got %r" % (key, v))
            else:
                vals[key] = v
        if len(vals) != 4:
            continue
        x, y, w, h = vals["x"], vals["y"], vals["w"], vals["h"]
        if x < 0 or y < 0 or w < 1 or h < 1:
            problems.add(where, "gridPos %r has negative position or empty size" % gp)
            continue
        if x + w > GRID_WIDTH:
            problems.add(where, "gridPos x+w = %d exceeds the grid width %d"
                         % (x + w, GRID_WIDTH))
        for other_where, (ox, oy, ow, oh) in boxes:
            if x < ox + ow and ox < x + w and y < oy + oh and oy < y + h:
                problems.add(where, "overlaps %s" % other_where)
        boxes.append((where, (x, y, w, h)))


def check_structure(args):
    problems = Problems()
    uid = provisioned_datasource_uid(args.datasources, problems)
    check_providers(args.providers, problems)
    dash = load_json(args.dashboard)
    where = display(args.dashboard)
    if not isinstance(dash, dict):
        problems.add(where, "top level is not an object")
        return problems.report(display(args.dashboard))

    for key, typ in REQUIRED_TOP_LEVEL.items():
        if key not in dash:
            problems.add(where, "missing top-level key %r" % key)
        elif not isinstance(dash[key], typ) or isinstance(dash[key], bool):
            problems.add(where, "%r must be %s" % (key, typ.__name__))
    if isinstance(dash.get("uid"), str) and not UID_RE.match(dash["uid"]):
        problems.add(where, "uid %r is not 1-40 characters of [A-Za-z0-9_-]"
                     % dash["uid"])
    if isinstance(dash.get("title"), str) and not dash["title"].strip():
        problems.add(where, "empty title")
    if isinstance(dash.get("schemaVersion"), int) and dash["schemaVersion"] < 36:
        problems.add(where, "schemaVersion %d is older than Grafana 9 (36)"
                     % dash["schemaVersion"])

    # Template variables.
    variables = set()
    templating = dash.get("templating") if isinstance(dash.get("templating"), dict) else {}
    var_list = templating.get("list", [])
    if not isinstance(var_list, list):
        problems.add(where, "templating.list must be a list")
        var_list = []
    for i, var in enumerate(var_list):
        vwhere = "template variable #%d" % i
        if not isinstance(var, dict):
            problems.add(vwhere, "is not an object")
            continue
        name = var.get("name")
        if not isinstance(name, str) or not re.match(r"^\w+$", name):
            problems.add(vwhere, "bad name %r" % name)
            continue
        vwhere = "template variable %r" % name
        if name in variables:
            problems.add(vwhere, "defined twice")
        variables.add(name)
        if var.get("type") not in VARIABLE_TYPES:
            problems.add(vwhere, "type %r not in %s" % (var.get("type"),
                                                        sorted(VARIABLE_TYPES)))
        if name not in SUBSTITUTIONS:
            problems.add(vwhere, "the exprs check only substitutes %s"
                         % sorted(SUBSTITUTIONS))
        for flag in ("multi", "includeAll"):
            if flag in var and not isinstance(var[flag], bool):
                problems.add(vwhere, "%s must be true or false" % flag)
        if var.get("type") == "query":
            check_datasource_ref(var.get("datasource"), uid, vwhere, problems)
            query = var.get("query")
            if isinstance(query, dict):
                query = query.get("query")
            if not isinstance(query, str) or not query.strip():
                problems.add(vwhere, "empty query")
            elif var.get("definition") not in (None, query):
                problems.add(vwhere, "definition %r differs from query %r"
                             % (var.get("definition"), query))

    # Panels.
    panels = dash.get("panels") if isinstance(dash.get("panels"), list) else []
    if not panels:
        problems.add(where, "no panels")
    ids = {}
    all_panels = list(iter_panels(panels))
    for index, panel in enumerate(all_panels):
        pwhere = panel_name(panel, index)
        if not isinstance(panel, dict):
            problems.add(pwhere, "is not an object")
            continue
        pid = panel.get("id")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid < 1:
            problems.add(pwhere, "id must be a positive integer, got %r" % pid)
        elif pid in ids:
            problems.add(pwhere, "id %d already used by %s" % (pid, ids[pid]))
        else:
            ids[pid] = pwhere
        ptype = panel.get("type")
        if ptype not in PANEL_TYPES:
            problems.add(pwhere, "type %r not in %s" % (ptype, sorted(PANEL_TYPES)))
        if not isinstance(panel.get("title"), str) or not panel["title"].strip():
            problems.add(pwhere, "missing title")
        if ptype in NO_TARGET_TYPES:
            continue
        check_datasource_ref(panel.get("datasource"), uid, pwhere, problems)
        targets = panel.get("targets")
        if not isinstance(targets, list) or not targets:
            problems.add(pwhere, "no targets")
            continue
        ref_ids = set()
        for t_index, target in enumerate(targets):
            twhere = "%s target #%d" % (pwhere, t_index)
            if not isinstance(target, dict):
                problems.add(twhere, "is not an object")
                continue
            ref_id = target.get("refId")
            if not isinstance(ref_id, str) or not ref_id:
                problems.add(twhere, "missing refId")
            elif ref_id in ref_ids:
                problems.add(twhere, "refId %r used twice" % ref_id)
            ref_ids.add(ref_id)
            twhere = "%s target %s" % (pwhere, ref_id)
            if "datasource" in target:
                check_datasource_ref(target["datasource"], uid, twhere, problems)
            expr = target.get("expr")
            if not isinstance(expr, str) or not expr.strip():
                problems.add(twhere, "empty expr")
                continue
            for name in used_variables(expr):
                if name not in SUBSTITUTIONS:
                    problems.add(twhere, "uses variable $%s; only %s are allowed"
                                 % (name, ", ".join("$" + n for n in sorted(SUBSTITUTIONS))))
                elif not name.startswith("__") and name not in variables:
                    problems.add(twhere, "uses undefined template variable $%s" % name)
            if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
                problems.add(twhere, "unbalanced brackets in %r" % expr)

    check_grid(panels, problems, "")
    for panel in panels:
        if isinstance(panel, dict) and panel.get("type") == "row" and panel.get("panels"):
            if not panel.get("collapsed"):
                problems.add(panel_name(panel, 0), "an expanded row must not hold panels")
            check_grid(panel["panels"], problems, "row %r: " % panel.get("title"))
    return problems.report(display(args.dashboard))


# --------------------------------------------------------------------------
# exprs


def substitute(expr):
    def repl(m):
        name = m.group(1) or m.group(2) or m.group(3)
        return SUBSTITUTIONS.get(name, m.group(0))
    return VAR_RE.sub(repl, expr)


def metric_names(expr):
    """Identifiers in expr that name one of this project's metrics."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    s = re.sub(r"#[^\n]*", "", s)                 # comments
    s = re.sub(r"\{[^}]*\}", "", s)              # label matchers
    s = re.sub(r"\[[^\]]*\]", "", s)             # ranges, subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)",
               "", s)                             # label name lists
    names = set()
    for token in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", s):
        if METRIC_RE.match(token):
            names.add(token)
    return names


class Prometheus:
    def __init__(self, url, timeout):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def get(self, path, params=None):
        url = self.url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as r:
                body = r.read()
        except urllib.error.HTTPError as e:
            body = e.read()  # Prometheus explains 400/422 in the JSON body.
        except (urllib.error.URLError, OSError) as e:
            raise RuntimeError("cannot reach %s: %s" % (url, e))
        try:
            doc = json.loads(body)
        except ValueError:
            raise RuntimeError("%s: not JSON: %r" % (url, body[:200]))
        if doc.get("status") != "success":
            raise RuntimeError("%s: %s" % (doc.get("errorType", "error"),
                                           doc.get("error", doc)))
        return doc["data"]

    def query(self, expr):
        data = self.get("/api/v1/query", {"query": expr})
        kind = data.get("resultType")
        result = data.get("result")
        if kind in ("vector", "matrix"):
            return len(result)
        return 1  # scalar or string


def dashboard_queries(dash):
    for panel in iter_panels(dash.get("panels", [])):
        if panel.get("type") in NO_TARGET_TYPES:
            continue
        for target in panel.get("targets") or []:
            if target.get("hide"):
                continue
            yield panel.get("title", "?"), target.get("refId", "?"), target.get("expr", "")


def alert_queries(alerts):
    for group in (alerts or {}).get("groups", []):
        for rule in group.get("rules", []):
            name = rule.get("alert") or rule.get("record") or "?"
            yield name, rule.get("expr", "")


def check_exprs(args):
    prom = Prometheus(args.prometheus, args.timeout)
    try:
        known = set(prom.get("/api/v1/label/__name__/values"))
    except RuntimeError as e:
        print("FAIL: %s" % e)
        return 1
    allowed_missing = set(args.allow_missing_metric or [])
    dash = load_json(args.dashboard)
    alerts = load_yaml(args.alerts)

    failures = 0
    want_data = with_data = 0
    rows = [("panel", title, ref, expr, title not in MAY_BE_EMPTY)
            for title, ref, expr in dashboard_queries(dash)]
    rows += [("alert", name, "", expr, False) for name, expr in alert_queries(alerts)]
    for kind, title, ref, expr, need_data in rows:
        label = "%s %r%s" % (kind, title, (" " + ref) if ref else "")
        query = substitute(expr).strip()
        leftover = list(used_variables(query))
        if leftover:
            print("FAIL  %s: unsubstituted variable(s) %s" % (label, ", ".join(leftover)))
            failures += 1
            continue
        missing = sorted(n for n in metric_names(query)
                         if n not in known and n not in allowed_missing)
        tolerated = sorted(n for n in metric_names(query)
                           if n not in known and n in allowed_missing)
        try:
            count = prom.query(query)
        except RuntimeError as e:
            print("FAIL  %s: query error: %s\n      expr: %s" % (label, e, query))
            failures += 1
            continue
        if missing:
            print("FAIL  %s: %d series; unknown metric(s) %s\n      expr: %s"
                  % (label, count, ", ".join(missing), query))
            failures += 1
            continue
        note = " (missing metric(s) %s allowed)" % ", ".join(tolerated) if tolerated else ""
        if kind == "alert":
            # Alert conditions are normally false: no series is fine.
            print("OK    %s: %d series%s" % (label, count, note))
        elif count:
            if need_data:
                want_data += 1
                with_data += 1
            print("OK    %s: %d series%s" % (label, count, note))
        elif not need_data or tolerated:
            # Allowed to be empty (MAY_BE_EMPTY, or --allow-missing-metric).
            print("EMPTY %s: 0 series, allowed%s" % (label, note))
        else:
            want_data += 1
            print("EMPTY %s: 0 series, expected data under load\n      expr: %s"
                  % (label, query))

    fraction = with_data / want_data if want_data else 1.0
    empty = want_data - with_data
    print("%d expression(s) checked: %d failed; %d of %d panel queries that should "
          "have data under load have it (%.0f%%, need %.0f%%)"
          % (len(rows), failures, with_data, want_data, 100 * fraction,
             100 * args.min_data_fraction))
    if failures:
        return 1
    if fraction < args.min_data_fraction:
        print("FAIL: %d panel quer%s without data (was reach-server under load "
              "in the last minute?)" % (empty, "y" if empty == 1 else "ies"))
        return 1
    return 0


def main():
    parser = argparse.ArgumentParser(
        description="Check deploy/'s Grafana dashboard and Prometheus alerts.")
    parser.add_argument("--dashboard", default=DEFAULT_DASHBOARD,
                        help="dashboard JSON (default: %(default)s)")
    parser.add_argument("--datasources", default=DEFAULT_DATASOURCES,
                        help="Grafana datasource provisioning (default: %(default)s)")
    parser.add_argument("--providers", default=DEFAULT_PROVIDERS,
                        help="Grafana dashboard provider provisioning (default: %(default)s)")
    parser.add_argument("--alerts", default=DEFAULT_ALERTS,
                        help="Prometheus alert rules (default: %(default)s)")
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("structure", help="validate the dashboard and provisioning files")
    ex = sub.add_parser("exprs", help="run every expression against a Prometheus")
    ex.add_argument("--prometheus", required=True, metavar="URL",
                    help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    ex.add_argument("--min-data-fraction", type=float, default=1.0, metavar="F",
                    help="share (0-1) of the panel queries expected to have data "
                    "that must return series (default: %(default)s, every one)")
    ex.add_argument("--allow-missing-metric", action="append", metavar="NAME",
                    help="treat metric NAME as known although Prometheus has "
                    "not seen it (e.g. a server build that predates it); "
                    "queries using it may be empty (repeatable)")
    ex.add_argument("--timeout", type=float, default=10.0,
                    help="seconds per HTTP request (default: %(default)s)")
    # Accept the global options after the mode too.
    for p in (sub.choices["structure"], ex):
        for opt in ("--dashboard", "--datasources", "--providers", "--alerts"):
            p.add_argument(opt, dest=opt[2:], default=argparse.SUPPRESS,
                           help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode == "structure":
        return check_structure(args)
    if not 0.0 <= args.min_data_fraction <= 1.0:
        parser.error("--min-data-fraction must be between 0 and 1")
    return check_exprs(args)


if __name__ == "__main__":
    sys.exit(main())
