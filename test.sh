#!/usr/bin/env bash
# Runs every test of every module in this repository (the root module and any
# nested one, such as the durable stores), with vet and the race detector.
#
# Every module runs even after one fails, so one failure never hides the
# rest. Modules run TEST_JOBS at a time (default 2; bash 5.1 or later, else
# one at a time); each module's output is printed whole when it ends, never
# interleaved with another's. A summary line per module comes at the end, and
# the exit status is non-zero if any module failed. Extra arguments go to
# `go test` (say `./test.sh -count=20`).
set -uo pipefail
cd "$(dirname "$0")"
# Every module runs in workspace mode (the root go.work, so each builds against
# the tree); internal/modules's TestModulesBuildAlone builds each one on its
# own (GOWORK=off, -mod=readonly) against the tree's modules at the versions
# the go.mod files require, as a user's `go get` would.
export GOWORK="$PWD/go.work"
# -trimpath: a compiled package does not depend on the directory it was built
# in, so TestModulesBuildAlone (copies in temporary directories, a private
# module cache, -race -trimpath too) finds every third-party package compiled
# here in the build cache instead of compiling all of them again.
export GOFLAGS="${GOFLAGS:-} -count=1 -trimpath"

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

# The longest modules first (each 3 to 7 minutes where the others take less
# than one: the TypeScript suites, the crash loops on both stores, the check
# that builds every module alone), so that the short ones fill the other lane
# at the end; then the rest by name.
slow=(. mcp store/pgstore store/sqlitestore examples/server)
dirs=()
for dir in "${slow[@]}"; do
	[ -f "$dir/go.mod" ] && dirs+=("$dir")
done
while read -r dir; do
	[[ " ${slow[*]} " == *" $dir "* ]] || dirs+=("$dir")
done < <(find . -name go.mod -not -path './go.mod' -not -path './.git/*' -not -path '*/node_modules/*' -print | sed 's|^\./||;s|/go.mod$||' | sort)

jobs=${TEST_JOBS:-2}
if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 501)); then
	jobs=1 # wait -n -p (which module ended) is bash 5.1
fi
logs=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do [ "$p" = - ] || kill -- "-$p" 2>/dev/null; done; rm -rf "$logs"' EXIT
trap 'exit 130' INT TERM

# One `go vet -race` of every module's packages first: one build graph, so
# modules run side by side below never compile the same dependency twice at
# once, and their own vet finds it all in the cache. Its failures show again
# in the module's own run, where they belong: its output is not printed.
start=$SECONDS
patterns=()
for dir in "${dirs[@]}"; do
	patterns+=("./${dir#.}/...") # ./... for the root
done
if go vet -race "${patterns[@]}" >"$logs/vet" 2>&1; then
	echo "== go vet -race of every module: ok ($((SECONDS - start)) s)"
else
	echo "== go vet -race of every module: failed ($((SECONDS - start)) s; the modules' own runs below say where)"
fi

# module runs vet and the tests of the module in $1 into the log file $2.
module() {
	(cd "$1" && go vet -race ./... && go test -race -timeout 25m "${@:3}" ./...) >"$2" 2>&1
}

# finish waits for one module to end, prints its output whole and records its
# summary line.
summary=()
starts=()
failed=0
finish() {
	local pid i rc
	if ((jobs > 1)); then
		wait -n -p pid
		rc=$?
	else
		for pid in "${pids[@]}"; do [ "$pid" = - ] || break; done
		wait "$pid"
		rc=$?
	fi
	for i in "${!pids[@]}"; do
		[ "${pids[$i]}" = "$pid" ] && break
	done
	pids[$i]=-
	local result=ok secs=$((SECONDS - starts[$i]))
	if ((rc != 0)); then
		result=FAIL
		failed=1
	fi
	echo "== ${dirs[$i]}: $result ($secs s)"
	cat "$logs/$i"
	summary[$i]=$(printf '%-4s  %s (%d s)' "$result" "${dirs[$i]}" "$secs")
}

running=0
for i in "${!dirs[@]}"; do
	if ((running == jobs)); then
		finish
		running=$((running - 1))
	fi
	starts[$i]=$SECONDS
	set -m # a process group of its own, which an interrupt stops whole (above)
	module "${dirs[$i]}" "$logs/$i" "$@" &
	pids[$i]=$!
	set +m
	running=$((running + 1))
done
while ((running > 0)); do
	finish
	running=$((running - 1))
done

echo
echo "== summary ($SECONDS s)"
printf '%s\n' "${summary[@]}"
exit "$failed"
