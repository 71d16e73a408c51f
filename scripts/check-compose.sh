#!/usr/bin/env bash
# Validates docker-compose.yml without a Docker engine:
#   1. against the Compose Specification's JSON schema, with check-jsonschema's vendored copy
#      (--builtin-schema vendor.compose-spec), so no schema is downloaded at run time;
#   2. cross-references the schema cannot see: depends_on targets, named volumes, bind-mounted files,
#      the build context and Dockerfile, and the Prometheus and RabbitMQ files the stack mounts;
#   3. that every image pulled has a pinned tag (not `latest`, not untagged), and that the rule files
#      prometheus.yml loads are mounted into the Prometheus container.
#
#   scripts/check-compose.sh [FILE]     default: docker-compose.yml at the repository root
#
# check-jsonschema (PyPI) is installed on first use into a virtual environment under .run/ (override
# with IFW_TOOLS_VENV). Exit status: 0 valid, 1 invalid, 75 the validator could not be installed
# (scripts/test.sh turns 75 into a warning).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FILE="${1:-$ROOT/docker-compose.yml}"
VENV="${IFW_TOOLS_VENV:-$ROOT/.run/tools-venv}"
CJ_VERSION='check-jsonschema>=0.28,<1'

[[ -f $FILE ]] || { echo "check-compose.sh: $FILE not found" >&2; exit 1; }

if ! "$VENV/bin/check-jsonschema" --version >/dev/null 2>&1; then
  if ! command -v python3 >/dev/null 2>&1; then
    echo "check-compose.sh: python3 is missing (scripts/deps.sh installs it); cannot validate" >&2
    exit 75
  fi
  echo "check-compose.sh: installing check-jsonschema into $VENV" >&2
  rm -rf "$VENV"
  if ! { python3 -m venv "$VENV" >/dev/null &&
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$CJ_VERSION" >/dev/null; }; then
    echo "check-compose.sh: could not install check-jsonschema from PyPI; cannot validate" >&2
    exit 75
  fi
fi

"$VENV/bin/check-jsonschema" --builtin-schema vendor.compose-spec "$FILE"

# ruamel.yaml comes with check-jsonschema.
"$VENV/bin/python" - "$FILE" <<'PY'
import os
import re
import sys

from ruamel.yaml import YAML

path = sys.argv[1]
base = os.path.dirname(os.path.abspath(path))
yaml = YAML(typ="safe")
with open(path) as f:
    doc = yaml.load(f)

errors = []
services = doc.get("services") or {}
declared_volumes = set((doc.get("volumes") or {}).keys())


def check_file(svc, what, rel, want_dir=False):
    p = os.path.normpath(os.path.join(base, rel))
    ok = os.path.isdir(p) if want_dir else os.path.exists(p)
    if not ok:
        errors.append(f"services.{svc}: {what} {rel} does not exist")
    return p


for name, svc in services.items():
    deps = svc.get("depends_on") or []
    for dep in deps if isinstance(deps, list) else deps.keys():
        if dep not in services:
            errors.append(f"services.{name}.depends_on: unknown service {dep!r}")
    for vol in svc.get("volumes") or []:
        if isinstance(vol, dict):
            src, kind = vol.get("source"), vol.get("type", "volume")
        else:
            src = vol.split(":")[0] if ":" in vol else None
            kind = "bind" if src and (src.startswith((".", "/", "~"))) else "volume"
        if not src:
            continue
        if kind == "bind":
            if src.startswith("."):
                check_file(name, "bind mount source", src)
        elif kind == "volume" and src not in declared_volumes:
            errors.append(f"services.{name}.volumes: named volume {src!r} is not declared at the top level")
    build = svc.get("build")
    if build is not None:
        ctx = build if isinstance(build, str) else build.get("context", ".")
        ctx_path = check_file(name, "build context", ctx, want_dir=True)
        dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
        if not os.path.isfile(os.path.join(ctx_path, dockerfile)):
            errors.append(f"services.{name}.build: {dockerfile} not found in {ctx}")
    if "image" not in svc and build is None:
        errors.append(f"services.{name}: neither image nor build")
    image = svc.get("image")
    if image and build is None:
        last = image.rsplit("/", 1)[-1]
        tag = last.split(":", 1)[1] if ":" in last else ""
        if "@sha256:" not in image and (not tag or tag == "latest"):
            errors.append(f"services.{name}: image {image!r} has no pinned tag")


def container_mounts(svc):
    """Container path -> host path of a service's bind mounts."""
    mounts = {}
    for vol in svc.get("volumes") or []:
        if isinstance(vol, str) and vol.startswith("."):
            parts = vol.split(":")
            mounts[parts[1]] = os.path.normpath(os.path.join(base, parts[0]))
    return mounts

# Files the stack mounts that have their own syntax.
prom = os.path.join(base, "deploy/prometheus/prometheus.yml")
if os.path.exists(prom):
    with open(prom) as f:
        p = yaml.load(f) or {}
    jobs = p.get("scrape_configs") or []
    if not jobs:
        errors.append("deploy/prometheus/prometheus.yml: no scrape_configs")
    for job in jobs:
        if "job_name" not in job:
            errors.append("deploy/prometheus/prometheus.yml: a scrape config has no job_name")
        for sd in job.get("dns_sd_configs") or []:
            for n in sd.get("names") or []:
                if n not in services:
                    errors.append(f"deploy/prometheus/prometheus.yml: dns_sd name {n!r} is not a compose service")
        for sc in job.get("static_configs") or []:
            for t in sc.get("targets") or []:
                host = t.rsplit(":", 1)[0]
                if host not in services:
                    errors.append(f"deploy/prometheus/prometheus.yml: target {t!r} is not a compose service")
    prom_services = [n for n, svc in services.items() if "prometheus" in str(svc.get("image", ""))]
    for rule_file in p.get("rule_files") or []:
        for n in prom_services:
            mounts = container_mounts(services[n])
            host = mounts.get(rule_file)
            if host is None:
                # A file inside a mounted folder.
                host = next((os.path.join(h, os.path.relpath(rule_file, c)) for c, h in mounts.items()
                             if rule_file.startswith(c.rstrip("/") + "/")), None)
            if host is None or not os.path.isfile(host):
                errors.append(f"deploy/prometheus/prometheus.yml: rule file {rule_file} is not mounted into services.{n}")
plugins = os.path.join(base, "deploy/rabbitmq/enabled_plugins")
if os.path.exists(plugins):
    text = open(plugins).read().strip()
    if not re.fullmatch(r"\[\s*([a-z_]+\s*(,\s*[a-z_]+\s*)*)?\]\s*\.", text):
        errors.append("deploy/rabbitmq/enabled_plugins: not an Erlang list of plugin names ending with '.'")

if errors:
    print("Compose cross-reference errors:", file=sys.stderr)
    for e in errors:
        print("  " + e, file=sys.stderr)
    sys.exit(1)
print(f"ok -- {os.path.relpath(path)}: {len(services)} services, references resolve")
PY
