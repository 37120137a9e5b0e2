#!/usr/bin/env bash
# Runs every test of every module in this repository (the root module and any
# nested one, such as the durable stores), with vet and the race detector.
set -euo pipefail
cd "$(dirname "$0")"
export GOWORK=off # each module on its own, through its replace directives (go.work is for `go run` from the root)
export GOFLAGS="${GOFLAGS:-} -count=1"
find . -name go.mod -not -path './.git/*' -print | sort | while read -r mod; do
	dir=$(dirname "$mod")
	echo "== $dir"
	(cd "$dir" && go vet ./... && go test -race -timeout 15m ./...)
done
