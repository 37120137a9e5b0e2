#!/usr/bin/env bash
# Runs every test of every module in this repository (the root module and any
# nested one, such as the durable stores), with vet and the race detector.
#
# One `go vet -race` of every module's packages, then one `go test -race` of
# all of them: one build graph, where each package is compiled once, and test
# binaries run TEST_JOBS at a time (default 4) as soon as each is linked, the
# slowest first, whichever module they belong to. Every package runs even
# after one fails, so one failure never hides the rest; each package's output
# is printed whole when it ends, never interleaved with another's. A summary
# line per module comes at the end, and the exit status is non-zero if vet or
# any package failed. Extra arguments go to `go test` (say
# `./test.sh -count=20`).
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

# The packages with the longest tests first, so that they start first and
# the short ones fill the other slots at the end: the check that builds every
# module alone, then the TypeScript suites and the crash loops (mcp, both
# stores) and the reference host; then the rest, module by module.
first=(./internal/modules ./mcp/... ./store/pgstore/... ./store/sqlitestore/... ./examples/server/...)
dirs=(.)
while read -r dir; do
	dirs+=("$dir")
done < <(find . -name go.mod -not -path './go.mod' -not -path './.git/*' -not -path '*/node_modules/*' -print | sed 's|^\./||;s|/go.mod$||' | sort)
patterns=()
for p in "${first[@]}"; do
	[ -e "${p%/...}" ] && patterns+=("$p")
done
for dir in "${dirs[@]}"; do
	patterns+=("./${dir#.}/...") # ./... for the root; go test lists a package once
done

jobs=${TEST_JOBS:-4}
logs=$(mktemp -d)
pid=
trap '[ -z "$pid" ] || kill -- "-$pid" 2>/dev/null; rm -rf "$logs"' EXIT
trap 'exit 130' INT TERM

# run runs a go command in a process group of its own (an interrupt or a TERM
# stops it whole: background jobs of a script ignore SIGINT), its output into
# the file $1; it returns the command's status.
run() {
	local out=$1
	shift
	set -m
	"$@" >"$out" 2>&1 &
	pid=$!
	set +m
	wait "$pid"
	local rc=$?
	pid=
	return $rc
}

failed=0
start=$SECONDS
if run "$logs/vet" go vet -race "${patterns[@]}"; then
	vet="ok    go vet -race of every module ($((SECONDS - start)) s)"
else
	vet="FAIL  go vet -race of every module ($((SECONDS - start)) s)"
	failed=1
	cat "$logs/vet"
fi
echo "== $vet"

# go vet ran every analyzer on every package, with the flags of the tests:
# go test's own vet (a subset of them) would only check it all again.
start=$SECONDS
run "$logs/test" go test -race -vet=off -p "$jobs" -timeout 25m "$@" "${patterns[@]}" || failed=1
cat "$logs/test"
echo "== go test -race of every module: $((SECONDS - start)) s"

# The summary: a module failed if one of its packages did (or did not
# report: a build failure of its test main); its time is its slowest
# package's.
paths=()
for dir in "${dirs[@]}"; do
	paths+=("$(sed -n 's/^module[[:space:]]*//p' "$dir/go.mod" | tr -d '"[:space:]')")
done
results=()
n=()
slowest=()
for i in "${!dirs[@]}"; do
	results[$i]=ok n[$i]=0 slowest[$i]=0
done
# go test's line per package: ok, FAIL or ?, a tab, the import path.
while IFS=$'\t' read -r status pkg rest; do
	status=${status%% *}
	pkg=${pkg%% *}
	owner=-1 # the innermost module holding pkg
	for j in "${!paths[@]}"; do
		if [ "$pkg" = "${paths[$j]}" ] || [[ "$pkg" == "${paths[$j]}"/* ]]; then
			((owner < 0 || ${#paths[$j]} > ${#paths[$owner]})) && owner=$j
		fi
	done
	((owner >= 0)) || continue
	n[$owner]=$((n[owner] + 1))
	[ "$status" = FAIL ] && results[$owner]=FAIL
	secs=${rest%%.*}
	[[ "$secs" =~ ^[0-9]+$ ]] && ((secs > slowest[owner])) && slowest[$owner]=$secs
done < <(grep -E $'^(ok|FAIL|\\?) *\t' "$logs/test")
echo
echo "== summary ($SECONDS s)"
echo "$vet"
for i in "${!dirs[@]}"; do
	((n[i] > 0)) || results[$i]=FAIL # not one of its packages reported
	[ "${results[$i]}" = FAIL ] && failed=1
	printf '%-4s  %s (its slowest package %d s, of %d)\n' "${results[$i]}" "${dirs[$i]}" "${slowest[$i]}" "${n[$i]}"
done
exit "$failed"
