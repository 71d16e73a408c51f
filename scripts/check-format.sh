#!/usr/bin/env bash
# Checks that the Swift sources are formatted as .swift-format says (issue 34): `swift format lint
# --strict` over Sources/, Tests/ and Benchmarks/'s own sources, and that every file that imports CCurl
# or CRabbitMQ imports CShims too. Fix the formatting with
#   swift format -i -r Sources Tests Benchmarks/Benchmarks Package.swift
# Exits 75 when the toolchain has no swift-format (Swift 6.0 and later ship it).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! swift format --version >/dev/null 2>&1; then
  echo "check-format.sh: swift format is not available in this toolchain" >&2
  exit 75
fi
paths=(Sources Tests Package.swift Benchmarks/Package.swift)
[[ -d Benchmarks/Benchmarks ]] && paths+=(Benchmarks/Benchmarks)
swift format lint --strict --parallel -r "${paths[@]}"

# CShims.h includes <curl/curl.h> and <amqp.h>. When the compiler loads CShims first, their
# declarations belong to it, and a file that imports CCurl or CRabbitMQ alone cannot see them; the
# break shows in one build mode and not the other, on unrelated changes (CShims.h says more).
missing=()
while IFS= read -r file; do
  grep -q '^import CShims$' "$file" || missing+=("$file")
done < <(grep -rlE '^import (CCurl|CRabbitMQ)$' Sources)
if ((${#missing[@]})); then
  printf 'check-format.sh: imports CCurl or CRabbitMQ without CShims: %s\n' "${missing[@]}" >&2
  exit 1
fi
