#!/usr/bin/env bash
# Checks that the Swift sources are formatted as .swift-format says (issue 34): `swift format lint
# --strict` over Sources/, Tests/ and Benchmarks/'s own sources. Fix with
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
