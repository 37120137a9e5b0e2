#!/usr/bin/env bash
# Runs every test of every module in this repository (the root module and any
# nested one, such as the durable stores), with vet and the race detector.
#
# Every module runs even after one fails, so one failure never hides the
# rest; a summary line per module comes at the end, and the exit status is
# non-zero if any module failed. Extra arguments go to `go test` (say
# `./test.sh -count=20`).
set -uo pipefail
cd "$(dirname "$0")"
# Every module runs in workspace mode (the root go.work, so each builds against
# the tree); internal/modules's TestModulesBuildAlone builds each one on its
# own (GOWORK=off, -mod=readonly) against the tree's modules at the versions
# the go.mod files require, as a user's `go get` would.
export GOWORK="$PWD/go.work"
export GOFLAGS="${GOFLAGS:-} -count=1"

# The pgstore tests (and the protocol servers' tests on PostgreSQL) start a
# throw-away server from the postgresql package's binaries: install them when
# they are missing and we may (root, as on CI). Without them the PostgreSQL
# tests say in one line that they are skipped, outside CI; under CI they fail.
if ! command -v initdb >/dev/null && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "== installing postgresql (apt-get install -y postgresql)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null ||
			{ DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; } ||
			echo "== apt-get install postgresql failed: the PostgreSQL tests cannot run"
	else
		echo "== no PostgreSQL server binaries and not root: the PostgreSQL tests will be skipped (outside CI)"
	fi
fi

# The official clients' suites (MCP: TypeScript, A2A: JavaScript) need node
# and npm; without them they are skipped (they fail under CI=true), and go
# test would not say so.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "node or npm not found: the TypeScript/JavaScript client suites are skipped (the Go suites still run)"
fi

summary=()
failed=0
while read -r mod; do
	dir=$(dirname "$mod")
	echo "== $dir"
	start=$SECONDS
	# vet with -race too, so that vet and the tests share one build of every
	# dependency (the SDKs of the adapters are large: half the cold build time)
	if (cd "$dir" && go vet -race ./... && go test -race -timeout 25m "$@" ./...); then
		summary+=("ok    $dir ($((SECONDS - start)) s)")
	else
		summary+=("FAIL  $dir ($((SECONDS - start)) s)")
		failed=1
	fi
done < <(find . -name go.mod -not -path './.git/*' -not -path '*/node_modules/*' -print | sort)

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
exit "$failed"
