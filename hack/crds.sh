#!/usr/bin/env bash
# Copies the CRDs the tests install besides ours out of the Go modules that
# ship them, pinned in hack/tools/crds/go.mod and verified by its go.sum:
#   ocm/     ManagedCluster, ManifestWork, ManagedClusterAddOn, ... (open-cluster-management.io/api)
#   policy/  ConfigurationPolicy (config-policy-controller) and Policy (governance-policy-propagator)
# Portable: bash and POSIX tools only (no GNU-only options), as on macOS.
set -euo pipefail
arg=${1:?usage: hack/crds.sh OUTPUT_DIR}
mkdir -p "$(dirname "$arg")"
out="$(cd "$(dirname "$arg")" && pwd)/$(basename "$arg")"
cd "$(dirname "$0")/tools/crds"

# dir is where the Go module cache holds the module this go.mod pins.
dir() { go mod download "$1" && go list -m -f '{{.Dir}}' "$1"; }

ocm=$(dir open-cluster-management.io/api)
cpc=$(dir open-cluster-management.io/config-policy-controller)
gpp=$(dir open-cluster-management.io/governance-policy-propagator)

# The add-on CRDs as OCM's hub installs them: from api v1.3.0 on, the
# v1beta1 folder holds them, serving v1alpha1 (stored) and v1beta1.
addons=addon/v1beta1
[ -d "$ocm/$addons" ] || addons=addon/v1alpha1

rm -rf "$out.tmp" && mkdir -p "$out.tmp/ocm" "$out.tmp/policy"
for f in \
  cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml \
  work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml \
  $addons/0000_00_addon.open-cluster-management.io_clustermanagementaddons.crd.yaml \
  $addons/0000_01_addon.open-cluster-management.io_managedclusteraddons.crd.yaml; do
  cp "$ocm/$f" "$out.tmp/ocm/"
done
cp "$cpc/deploy/crds/policy.open-cluster-management.io_configurationpolicies.yaml" "$out.tmp/policy/"
cp "$gpp/deploy/crds/policy.open-cluster-management.io_policies.yaml" "$out.tmp/policy/"
chmod 0644 "$out.tmp"/ocm/* "$out.tmp"/policy/*
rm -rf "$out" && mv "$out.tmp" "$out"
