#!/usr/bin/env bash
# Validates the monitoring files of deploy/ without a Prometheus or Grafana server:
#   1. deploy/prometheus/rules.yml with `promtool check rules`, and its unit tests
#      deploy/prometheus/rules.test.yml with `promtool test rules`;
#   2. deploy/prometheus/prometheus.yml with `promtool check config` (its rule_files path, which is
#      the container's, pointed at the repository's rules.yml);
#   3. that every Grafana dashboard under deploy/grafana/dashboards/ is JSON with a uid, a title and
#      panels that each have a datasource or are rows.
# Whether the expressions name metrics the worker exports is checked against a real /metrics page by
# the integration tests (scripts/check-metric-names.py).
#
# promtool comes with Debian's `prometheus` package, which scripts/deps.sh installs on first use.
# Exit status: 0 valid, 1 invalid or promtool missing (scripts/test.sh fails on both: `make test`
# must not pass without having run these checks).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROM="$ROOT/deploy/prometheus"

if ! command -v promtool >/dev/null 2>&1; then
  echo "check-prometheus.sh: installing promtool (Debian package prometheus)" >&2
  IFW_DEPS_EXTRA=prometheus "$ROOT/scripts/deps.sh" --no-swift >&2 || true
  command -v promtool >/dev/null 2>&1 || { echo "check-prometheus.sh: promtool is missing and could not be installed" >&2; exit 1; }
fi

promtool check rules "$PROM/rules.yml"
promtool test rules "$PROM/rules.test.yml"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
sed "s#/etc/prometheus/rules.yml#$PROM/rules.yml#" "$PROM/prometheus.yml" >"$tmp/prometheus.yml"
grep -q "$PROM/rules.yml" "$tmp/prometheus.yml" || { echo "check-prometheus.sh: prometheus.yml loads no /etc/prometheus/rules.yml" >&2; exit 1; }
promtool check config "$tmp/prometheus.yml"

python3 - "$ROOT"/deploy/grafana/dashboards/*.json <<'PY'
import json, sys
errors = []
for path in sys.argv[1:]:
    try:
        d = json.load(open(path))
    except ValueError as e:
        errors.append(f"{path}: not JSON: {e}")
        continue
    for key in ("uid", "title", "panels"):
        if not d.get(key):
            errors.append(f"{path}: no {key}")
    for p in d.get("panels", []):
        if p.get("type") != "row" and not p.get("datasource"):
            errors.append(f"{path}: panel {p.get('title')!r} has no datasource")
        if p.get("type") != "row" and not p.get("targets"):
            errors.append(f"{path}: panel {p.get('title')!r} has no query")
for e in errors:
    print("  " + e, file=sys.stderr)
if errors:
    sys.exit(1)
print(f"ok -- {len(sys.argv) - 1} Grafana dashboard(s)")
PY
