// Package controller holds the operator's reconcilers: the CleanupPolicy
// reconciler, which compiles policies and reports what they govern; one
// generic reconciler with an adapter per governed kind, registered in
// Targets (ManagedCluster, ManifestWork, ConfigurationPolicy), that stamps
// what the governing policy decides, and the executor of a deleted
// ManagedCluster's teardown plan (it writes the plan's next step, and only
// that); the publisher of the prune decisions for OCM hub
// templates; and the switch that turns the kinds a hub may not serve on and
// off as their CRDs come and go. What they read for governance and for a
// teardown goes through internal/snapshot; what they decide is decided in
// internal/decision.
package controller
