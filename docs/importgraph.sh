#!/usr/bin/env bash
# Prints the import arrows between bgtask's own packages, every module of the
# repository, main packages left out: one line per package, "pkg: imports",
# with github.com/bgtask/bgtask shortened to bgtask. docs/packages.md's
# graph block is its output; TestPackagesImportGraph (packages_test.go)
# regenerates it and fails when the two differ.
#
# Usage, from the repository root: docs/importgraph.sh .
set -euo pipefail
cd "${1:-.}"
export LC_ALL=C GOWORK="$PWD/go.work" # every module against the tree, as the workspace builds it
for mod in $(find . -name go.mod -not -path './.git/*' -not -path '*/node_modules/*' -exec dirname {} \; | sort); do
  (cd "$mod" && go list -f '{{if not (eq .Name "main")}}{{.ImportPath}}: {{join .Imports " "}}{{end}}' ./...)
done | sed 's#github.com/bgtask/bgtask#bgtask#g' | awk '{
  printf "%s", $1; sep=" ";
  for (i=2;i<=NF;i++) if ($i ~ /^bgtask(\/|$)/) { printf "%s%s", sep, $i; sep=", " }
  printf "\n" }'
