#!/usr/bin/env bash
# Copies the CRDs the tests install besides ours out of the Go modules that
# ship them, pinned in hack/tools/crds/go.mod and verified by its go.sum:
#   ocm/     ManagedCluster, ManifestWork, ManagedClusterAddOn, ... (open-cluster-management.io/api)
#   policy/  ConfigurationPolicy (config-policy-controller) and Policy (governance-policy-propagator)
set -euo pipefail
out=$(realpath -m "${1:?usage: hack/crds.sh OUTPUT_DIR}")
cd "$(dirname "$0")/tools/crds"

dir() { go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'; }

ocm=$(dir open-cluster-management.io/api)
cpc=$(dir open-cluster-management.io/config-policy-controller)
gpp=$(dir open-cluster-management.io/governance-policy-propagator)

rm -rf "$out.tmp" && mkdir -p "$out.tmp/ocm" "$out.tmp/policy"
for f in \
  cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml \
  work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml \
  addon/v1alpha1/0000_00_addon.open-cluster-management.io_clustermanagementaddons.crd.yaml \
  addon/v1alpha1/0000_01_addon.open-cluster-management.io_managedclusteraddons.crd.yaml; do
  install -m 0644 "$ocm/$f" "$out.tmp/ocm/"
done
install -m 0644 "$cpc/deploy/crds/policy.open-cluster-management.io_configurationpolicies.yaml" "$out.tmp/policy/"
install -m 0644 "$gpp/deploy/crds/policy.open-cluster-management.io_policies.yaml" "$out.tmp/policy/"
rm -rf "$out" && mv "$out.tmp" "$out"
