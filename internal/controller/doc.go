// Package controller lists the governed kinds (Targets) and wires each
// kind's reconciler into the manager with what it shares (Deps): the
// ManagedCluster's governance (internal/governance) and teardown
// (internal/teardown), the stamped ManifestWorks and ConfigurationPolicies
// (internal/stamp). Its tests run every reconciler together, the
// CleanupPolicy's (internal/policy) included, against a real API server.
// It holds no reconciler of its own and no state.
package controller
