#!/usr/bin/env python3
"""Checks that every PromQL expression of the Grafana dashboard and the alert rules names only metrics
that exist: the families of a real /metrics page of the worker, or one of the lists below.

    scripts/check-metric-names.py METRICS_PAGE [FILE ...]
        default FILEs: deploy/grafana/dashboards/*.json and deploy/prometheus/rules.yml

The integration test ObservabilityTests.dashboardAndRulesNameExportedMetrics runs it against the page of
a worker that has just processed jobs. Exit status 0 when every name resolves, 1 otherwise.
Standard library only (the rules are read as the small YAML subset they use).
"""
import glob
import json
import os
import re
import sys

# Worker metrics the dashboard or rules may name before the worker exports them (a feature on another
# branch); once /metrics has them they are checked like any other. Empty: the per-origin admission's
# metrics, listed here while it was being written, are exported now.
PENDING_WORKER_METRICS: set = set()
# Not the worker's: the broker's rabbitmq_prometheus plugin (/metrics/detailed, queue families) and
# Prometheus itself.
OTHER_SOURCES = {
    "rabbitmq_detailed_queue_messages_ready",
    "rabbitmq_detailed_queue_consumers",
    "up",
}

KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset",
    "bool", "inf", "nan", "atan2",
}


def exported_names(page):
    """Series names of an exposition, with _bucket/_sum/_count for histograms and summaries."""
    names = set()
    for line in page.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                names.add(parts[2])
                if parts[3] in ("histogram", "summary"):
                    names.update(parts[2] + s for s in ("_bucket", "_sum", "_count"))
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, 1)[0])
    return names


def metric_names(expr):
    """The metric names an expression selects."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)              # string literals
    text = re.sub(r"\{[^}]*\}", "", text)                         # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)                        # ranges, subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        name = match.group(0)
        following = text[match.end():].lstrip()
        if following.startswith("("):                              # a function
            continue
        if name.lower() in KEYWORDS or text[match.start() - 1:match.start()] == "$":
            continue
        names.add(name)
    return names


def dashboard_expressions(path):
    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                yield node.get("title", ""), node["expr"]
            for key, value in node.items():
                for title, expr in walk(value):
                    yield (title or node.get("title", "")), expr
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)
    with open(path) as f:
        yield from walk(json.load(f))


def rule_expressions(path):
    """`expr:` values of a rules file: single-line, or a block scalar (`|`) on the lines below."""
    lines = open(path).read().splitlines()
    alert = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\s*-?\s*alert:\s*(\S+)", line)
        if m:
            alert = m.group(1)
        m = re.match(r"(\s*)expr:\s*(.*)$", line)
        if m:
            indent, value = len(m.group(1)), m.group(2)
            if value.startswith("|") or value.startswith(">"):
                block = []
                i += 1
                while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                    block.append(lines[i])
                    i += 1
                yield alert, "\n".join(block)
                continue
            yield alert, value.strip().strip("'\"")
        i += 1


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    page = open(argv[1]).read()
    exported = exported_names(page)
    if not any(n.startswith("image_fetch_") for n in exported):
        print(f"check-metric-names: {argv[1]} has no image_fetch_ metric: not a worker's /metrics page", file=sys.stderr)
        return 1
    files = argv[2:] or sorted(glob.glob(os.path.join(root, "deploy/grafana/dashboards/*.json"))) + [
        os.path.join(root, "deploy/prometheus/rules.yml")]
    errors, checked, pending = [], 0, set()
    for path in files:
        source = dashboard_expressions(path) if path.endswith(".json") else rule_expressions(path)
        for title, expr in source:
            checked += 1
            names = metric_names(expr)
            if not names:
                errors.append(f"{os.path.relpath(path, root)}: {title!r}: no metric in {expr!r}")
            for name in sorted(names):
                if name in exported or name in OTHER_SOURCES:
                    continue
                if name in PENDING_WORKER_METRICS:
                    pending.add(name)
                    continue
                errors.append(f"{os.path.relpath(path, root)}: {title!r}: {name} is not exported")
    for e in errors:
        print("  " + e, file=sys.stderr)
    if errors:
        print(f"check-metric-names: {len(errors)} unknown metric names in {checked} expressions", file=sys.stderr)
        return 1
    note = f"; not yet exported (pending list): {', '.join(sorted(pending))}" if pending else ""
    print(f"ok -- {checked} expressions name only exported metrics{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
