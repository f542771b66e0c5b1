#!/usr/bin/env bash
# Builds one Go command and says how far the build is, for the binaries whose
# first build takes minutes (kube-apiserver compiles about two thousand
# packages). Run from the command's module directory:
#   hack/gobuild.sh WHAT OUTPUT PACKAGE [go build flags...]
# prints "building WHAT: ...", then every tenth of the packages compiled
# "NAME: N of M packages compiled" (M counts every package the command imports,
# so N stops short of M when the build cache holds some), then that it links, and
# at the end the seconds the build took.
# Portable: bash and POSIX tools only (no GNU-only options), as on macOS.
set -euo pipefail
what=${1:?usage: hack/gobuild.sh WHAT OUTPUT PACKAGE [go build flags...]}
out=${2:?usage: hack/gobuild.sh WHAT OUTPUT PACKAGE [go build flags...]}
pkg=${3:?usage: hack/gobuild.sh WHAT OUTPUT PACKAGE [go build flags...]}
shift 3
name=$(basename "$out")

echo "building $what: the first build takes several minutes"
SECONDS=0
deps=$(mktemp)
trap 'rm -f "$deps"' EXIT
go list -deps "$pkg" | grep -vx unsafe >"$deps" # unsafe is never compiled
main=$(go list -f '{{.ImportPath}}' "$pkg")
total=$(wc -l <"$deps" | tr -d ' ')

# go build -v names each package as it compiles it (not those taken from the
# build cache); lines that are no package of the command, such as compiler
# errors, pass through unchanged.
go build -v -o "$out" "$@" "$pkg" 2>&1 | awk -v name="$name" -v total="$total" -v main="$main" '
	NR == FNR { dep[$0] = 1; next }
	!($0 in dep) { print; fflush(); next }
	{
		n++
		step = int(total / 10); if (step < 1) step = 1
		if ($0 == main) printf "%s: compiling the main package, then linking\n", name
		else if (n % step == 0) printf "%s: %d of %d packages compiled\n", name, n, total
		fflush()
	}
	END { printf "%s: %d of %d packages compiled, the rest from the build cache\n", name, n + 0, total }
' "$deps" -
echo "built $name in ${SECONDS}s"
