#!/usr/bin/env bash
# Validates the Kubernetes manifests under deploy/kubernetes/ without a cluster:
#   1. core objects (ConfigMap, Secret, Deployment) against the Kubernetes OpenAPI schemas that
#      kubernetes-validate bundles (--strict: unknown fields are errors); nothing is downloaded;
#   2. KEDA objects (ScaledObject, TriggerAuthentication), whose CRD schemas are not bundled, against
#      scripts/schemas/keda-v2.schema.json, written from KEDA's documented spec;
#   3. cross-references no schema can see: the ScaledObject targets the Deployment and scales on the
#      queue the ConfigMap names, with protocol http and mode QueueLength; the TriggerAuthentication
#      and the envFrom ConfigMap and Secret exist; terminationGracePeriodSeconds is above
#      WORKER_DRAIN_TIMEOUT + 5; the probes and the scrape annotation use the container's port and
#      HTTP_PORT; the pods run as non-root; the scaled Deployment sets no replicas; the ConfigMap
#      uses quorum queues; kustomization.yaml lists every manifest (and only existing files).
#
#   scripts/check-kubernetes.sh [DIR]     default: deploy/kubernetes at the repository root
#
# kubernetes-validate and check-jsonschema (PyPI) are installed on first use into the virtual
# environment scripts/check-compose.sh uses (.run/tools-venv; override with IFW_TOOLS_VENV).
# Exit status: 0 valid, 1 invalid, 75 the validators could not be installed (scripts/test.sh turns
# 75 into a warning).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-$ROOT/deploy/kubernetes}"
VENV="${IFW_TOOLS_VENV:-$ROOT/.run/tools-venv}"
KV_VERSION='kubernetes-validate>=1.30,<2'
CJ_VERSION='check-jsonschema>=0.28,<1'
SCHEMA="$ROOT/scripts/schemas/keda-v2.schema.json"
# The Kubernetes minor version the manifests must be valid for; kubernetes-validate bundles many.
K8S_VERSION="${IFW_KUBERNETES_VERSION:-1.30}"

[[ -d $DIR ]] || { echo "check-kubernetes.sh: $DIR not found" >&2; exit 1; }

if ! "$VENV/bin/kubernetes-validate" --version >/dev/null 2>&1; then
  if ! command -v python3 >/dev/null 2>&1; then
    echo "check-kubernetes.sh: python3 is missing (scripts/deps.sh installs it); cannot validate" >&2
    exit 75
  fi
  echo "check-kubernetes.sh: installing kubernetes-validate into $VENV" >&2
  if ! { { [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV" >/dev/null; } &&
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$KV_VERSION" "$CJ_VERSION" >/dev/null; }; then
    echo "check-kubernetes.sh: could not install kubernetes-validate from PyPI; cannot validate" >&2
    exit 75
  fi
fi

shopt -s nullglob
files=()
for file in "$DIR"/*.yaml "$DIR"/*.yml; do
  [[ $(basename "$file") == kustomization.y*ml ]] || files+=("$file")
done
((${#files[@]} > 0)) || { echo "check-kubernetes.sh: no manifests in $DIR" >&2; exit 1; }
KUSTOMIZATION=("$DIR"/kustomization.yaml "$DIR"/kustomization.yml)

# 1. Core objects. kubernetes-validate warns (and passes) on kinds it has no schema for; step 2
#    covers those, and step 3 fails on any kind that neither step knows.
"$VENV/bin/kubernetes-validate" --strict --quiet --no-warn -k "$K8S_VERSION" "${files[@]}"

# 2 and 3. ruamel.yaml and jsonschema come with the validators.
IFW_KUSTOMIZATION="${KUSTOMIZATION[0]:-}" "$VENV/bin/python" - "$SCHEMA" "${files[@]}" <<'PY'
import json
import os
import sys

import jsonschema
from ruamel.yaml import YAML

schema_path, paths = sys.argv[1], sys.argv[2:]
with open(schema_path) as f:
    keda_schema = json.load(f)
validator_class = jsonschema.validators.validator_for(keda_schema)
validator_class.check_schema(keda_schema)
keda = validator_class(keda_schema)

yaml = YAML(typ="safe")
objects = []  # (file, object)
for path in paths:
    with open(path) as f:
        for doc in yaml.load_all(f):
            if doc is not None:
                objects.append((os.path.relpath(path), doc))

errors = []
core = {"ConfigMap", "Secret", "Deployment", "Service", "ServiceAccount", "PodDisruptionBudget"}
by_kind = {}
for path, obj in objects:
    kind = obj.get("kind")
    name = (obj.get("metadata") or {}).get("name")
    by_kind.setdefault(kind, {})[name] = obj
    if str(obj.get("apiVersion", "")).startswith("keda.sh/"):
        for e in sorted(keda.iter_errors(obj), key=lambda e: list(e.absolute_path)):
            where = "/".join(str(p) for p in e.absolute_path) or "(root)"
            errors.append(f"{path}: {kind} {name}: {where}: {e.message}")
    elif kind not in core:
        errors.append(f"{path}: {kind} {name}: no schema checks this kind")


def get(obj, *keys, default=None):
    for k in keys:
        if not isinstance(obj, dict) or k not in obj:
            return default
        obj = obj[k]
    return obj


deployments = by_kind.get("Deployment", {})
configmaps = by_kind.get("ConfigMap", {})
secrets = by_kind.get("Secret", {})
if len(deployments) != 1:
    errors.append(f"expected one Deployment, found {len(deployments)}")
for dname, dep in deployments.items():
    pod = get(dep, "spec", "template", "spec", default={})
    labels = get(dep, "spec", "template", "metadata", "labels", default={})
    selector = get(dep, "spec", "selector", "matchLabels", default={})
    if any(labels.get(k) != v for k, v in selector.items()):
        errors.append(f"Deployment {dname}: selector {selector} does not match the pod labels {labels}")
    if get(pod, "securityContext", "runAsNonRoot") is not True:
        errors.append(f"Deployment {dname}: pod securityContext.runAsNonRoot must be true")
    env = {}
    for container in pod.get("containers") or []:
        for source in container.get("envFrom") or []:
            if "configMapRef" in source:
                ref = source["configMapRef"]["name"]
                if ref not in configmaps:
                    errors.append(f"Deployment {dname}: envFrom ConfigMap {ref!r} is not defined")
                else:
                    env.update(configmaps[ref].get("data") or {})
            if "secretRef" in source:
                ref = source["secretRef"]["name"]
                if ref not in secrets:
                    errors.append(f"Deployment {dname}: envFrom Secret {ref!r} is not defined")
                else:
                    env.update(secrets[ref].get("stringData") or {})
                    env.update({k: "<data>" for k in (secrets[ref].get("data") or {})})
        for item in container.get("env") or []:
            env[item["name"]] = item.get("value", "<from>")
    if "AMQP_URL" in env and "AMQP_URL_FILE" in env:
        errors.append(f"Deployment {dname}: both AMQP_URL and AMQP_URL_FILE are set; the worker refuses that")
    if "AMQP_URL" not in env and "AMQP_URL_FILE" not in env:
        errors.append(f"Deployment {dname}: neither AMQP_URL nor AMQP_URL_FILE reaches the container")
    drain = float(env.get("WORKER_DRAIN_TIMEOUT", "25"))
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if not grace > drain + 5:
        errors.append(f"Deployment {dname}: terminationGracePeriodSeconds {grace} must exceed "
                      f"WORKER_DRAIN_TIMEOUT {drain:g} + 5 (aborted fetches settle for up to 5 s)")
    http_port = int(env.get("HTTP_PORT", "9090"))
    for container in pod.get("containers") or []:
        ports = {p.get("name"): p["containerPort"] for p in container.get("ports") or []}
        if http_port not in ports.values():
            errors.append(f"Deployment {dname}: container {container['name']} does not expose HTTP_PORT {http_port}")
        for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
            get_ = get(container, probe, "httpGet")
            if not get_:
                errors.append(f"Deployment {dname}: container {container['name']} has no {probe} httpGet")
                continue
            if get_.get("path") != path:
                errors.append(f"Deployment {dname}: {probe} should GET {path}, not {get_.get('path')}")
            port = get_.get("port")
            if (ports.get(port) if isinstance(port, str) else port) != http_port:
                errors.append(f"Deployment {dname}: {probe} port {port!r} is not HTTP_PORT {http_port}")
        if not get(container, "resources", "requests"):
            errors.append(f"Deployment {dname}: container {container['name']} has no resource requests")
    annotations = get(dep, "spec", "template", "metadata", "annotations", default={})
    if annotations.get("prometheus.io/scrape") == "true" and annotations.get("prometheus.io/port") != str(http_port):
        errors.append(f"Deployment {dname}: prometheus.io/port is not HTTP_PORT {http_port}")

    for sname, so in by_kind.get("ScaledObject", {}).items():
        target = get(so, "spec", "scaleTargetRef", default={})
        if target.get("name") not in deployments or target.get("kind", "Deployment") != "Deployment":
            errors.append(f"ScaledObject {sname}: scaleTargetRef {target} is not the Deployment")
        for trigger in get(so, "spec", "triggers", default=[]):
            if trigger.get("type") != "rabbitmq":
                continue
            meta = trigger.get("metadata") or {}
            if meta.get("protocol") != "http":
                errors.append(f"ScaledObject {sname}: the rabbitmq trigger must use protocol http (the amqp "
                              "protocol counts only ready messages and scales busy replicas down)")
            if meta.get("mode") != "QueueLength":
                errors.append(f"ScaledObject {sname}: the rabbitmq trigger should use mode QueueLength")
            if meta.get("excludeUnacknowledged") == "true":
                errors.append(f"ScaledObject {sname}: excludeUnacknowledged would count only ready messages")
            jobs = env.get("QUEUE_JOBS", "image-fetch.jobs")
            if meta.get("queueName") != jobs:
                errors.append(f"ScaledObject {sname}: queueName {meta.get('queueName')!r} is not QUEUE_JOBS {jobs!r}")
            prefetch = env.get("AMQP_PREFETCH")
            if prefetch and "value" in meta and float(meta["value"]) > float(prefetch):
                errors.append(f"ScaledObject {sname}: value {meta['value']} is above AMQP_PREFETCH {prefetch}: "
                              "busy replicas alone would ask for fewer pods")
            ref = get(trigger, "authenticationRef", "name")
            kinds = ("ClusterTriggerAuthentication",) if get(trigger, "authenticationRef", "kind") == \
                "ClusterTriggerAuthentication" else ("TriggerAuthentication",)
            if not ref or not any(ref in by_kind.get(k, {}) for k in kinds):
                errors.append(f"ScaledObject {sname}: authenticationRef {ref!r} is not defined")
            elif "host" not in meta and "hostFromEnv" not in meta:
                auth = by_kind[kinds[0]][ref]
                params = {r.get("parameter") for r in get(auth, "spec", "secretTargetRef", default=[])}
                if "host" not in params:
                    errors.append(f"TriggerAuthentication {ref}: no secretTargetRef for the host parameter")
                for r in get(auth, "spec", "secretTargetRef", default=[]):
                    sec = secrets.get(r.get("name"))
                    if sec is None:
                        errors.append(f"TriggerAuthentication {ref}: Secret {r.get('name')!r} is not defined")
                    elif r.get("key") not in {**(sec.get("stringData") or {}), **(sec.get("data") or {})}:
                        errors.append(f"TriggerAuthentication {ref}: Secret {r.get('name')} has no key {r.get('key')!r}")
                    elif r.get("parameter") == "host":
                        host = (sec.get("stringData") or {}).get(r.get("key"), "")
                        if host and not host.startswith(("http://", "https://")):
                            errors.append(f"Secret {r.get('name')}: host must be the management API "
                                          "(http[s]://user:password@host:15672/VHOST) for protocol http")

for pname, pdb in by_kind.get("PodDisruptionBudget", {}).items():
    sel = get(pdb, "spec", "selector", "matchLabels", default={})
    if not any(all(get(d, "spec", "template", "metadata", "labels", default={}).get(k) == v for k, v in sel.items())
               for d in deployments.values()):
        errors.append(f"PodDisruptionBudget {pname}: selector {sel} matches no Deployment's pods")

if not by_kind.get("ScaledObject"):
    errors.append("no KEDA ScaledObject found")

# KEDA owns the replica count of the Deployment it scales: a `replicas` there is re-applied on
# every `kubectl apply` and fights the autoscaler.
scaled = {get(so, "spec", "scaleTargetRef", "name") for so in by_kind.get("ScaledObject", {}).values()}
for dname, dep in deployments.items():
    if dname in scaled and get(dep, "spec", "replicas") is not None:
        errors.append(f"Deployment {dname}: has spec.replicas, but ScaledObject scales it; leave replicas out")
for cname, cm in configmaps.items():
    if "QUEUE_JOBS" in (cm.get("data") or {}) and (cm.get("data") or {}).get("QUEUE_TYPE") != "quorum":
        errors.append(f"ConfigMap {cname}: QUEUE_TYPE should be quorum (replicated queues, at-least-once dead-lettering)")

# The kustomization ties the directory together: it lists every manifest, and nothing else.
kustomization_path = os.environ.get("IFW_KUSTOMIZATION") or ""
if not kustomization_path or not os.path.exists(kustomization_path):
    errors.append("no kustomization.yaml: `kubectl apply -k` needs one that lists the manifests")
else:
    with open(kustomization_path) as f:
        k = yaml.load(f) or {}
    if k.get("apiVersion") != "kustomize.config.k8s.io/v1beta1" or k.get("kind") != "Kustomization":
        errors.append(f"{os.path.relpath(kustomization_path)}: not a kustomize.config.k8s.io/v1beta1 Kustomization")
    known = {"apiVersion", "kind", "resources", "labels", "commonLabels", "commonAnnotations", "namespace",
             "namePrefix", "nameSuffix", "images", "configMapGenerator", "secretGenerator", "patches"}
    for field in sorted(set(k) - known):
        errors.append(f"{os.path.relpath(kustomization_path)}: unknown field {field!r}")
    listed = k.get("resources") or []
    base = os.path.dirname(kustomization_path)
    for resource in listed:
        if not os.path.isfile(os.path.join(base, resource)):
            errors.append(f"{os.path.relpath(kustomization_path)}: resource {resource!r} does not exist")
    if len(set(listed)) != len(listed):
        errors.append(f"{os.path.relpath(kustomization_path)}: a resource is listed twice")
    for path in paths:
        if os.path.basename(path) not in listed:
            errors.append(f"{os.path.relpath(kustomization_path)}: does not list {os.path.basename(path)}")

if errors:
    print("Kubernetes manifest errors:", file=sys.stderr)
    for e in errors:
        print("  " + e, file=sys.stderr)
    sys.exit(1)
kinds = ", ".join(f"{len(v)} {k}" for k, v in sorted(by_kind.items()))
print(f"ok -- {len(paths)} files: {kinds}; schemas and references check out")
PY
