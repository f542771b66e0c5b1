// The modules whose CRDs the tests install: listed here, not in the
// operator's go.mod, so their dependencies never reach the operator.
module github.com/fleetops-dev/cleanup-operator/hack/tools/crds

go 1.26.0

require (
	open-cluster-management.io/api v1.3.0
	open-cluster-management.io/config-policy-controller v0.18.0
	open-cluster-management.io/governance-policy-propagator v0.18.0
)
