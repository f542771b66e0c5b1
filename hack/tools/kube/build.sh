#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager or kubectl from this module
# with the version Kubernetes' own build stamps in (hack/lib/version.sh): the
# version of k8s.io/kubernetes that go.mod pins, so that the server's /version
# and `kubectl version` report a release that clients parse and compare (Helm's
# kubeVersion, server-side apply, ...). Without these flags they report
# "v0.0.0-master+$Format:%H$".
#   hack/tools/kube/build.sh NAME PLACE OUTPUT    e.g. kube-apiserver "1 of 4" bin/kube-apiserver
# Portable: bash and POSIX tools only (no GNU-only options), as on macOS.
set -euo pipefail
name=${1:?usage: hack/tools/kube/build.sh NAME PLACE OUTPUT}
place=${2:?usage: hack/tools/kube/build.sh NAME PLACE OUTPUT}
arg=${3:?usage: hack/tools/kube/build.sh NAME PLACE OUTPUT}
mkdir -p "$(dirname "$arg")"
out="$(cd "$(dirname "$arg")" && pwd)/$(basename "$arg")"
cd "$(dirname "$0")"

version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes) # v1.36.3
minor=${version#v*.}
minor=${minor%%.*}
major=${version#v}
major=${major%%.*}
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags="$ldflags -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
	ldflags="$ldflags -X $pkg.gitTreeState=archive -X $pkg.gitCommit="
	ldflags="$ldflags -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done

exec ../../gobuild.sh "$name ($place) from k8s.io/kubernetes $version" "$out" "./cmd/$name" -ldflags "$ldflags"
