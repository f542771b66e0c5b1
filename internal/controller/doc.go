// Package controller holds the operator's reconcilers: the CleanupPolicy
// reconciler, which compiles policies and reports what they govern; one
// generic reconciler with an adapter per governed kind, registered in
// Targets (ManagedCluster, ManifestWork, ConfigurationPolicy), that stamps
// what the governing policy decides; the teardown of a deleted
// ManagedCluster, a reconciler of its own that writes its plan's next step,
// and only that; and the publisher of the prune decisions for OCM hub
// templates. What they read for governance and for a teardown goes through
// internal/snapshot; what they decide is decided in internal/decision; the
// teardown's records are written by internal/record; the kinds a hub may
// not serve are turned on and off by internal/watch.
package controller
