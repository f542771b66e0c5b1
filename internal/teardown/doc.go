// Package teardown owns the teardown of a deleted ManagedCluster that
// carries the operator's finalizer: one reconciler (Get, Govern, one step
// of the plan internal/decision makes from an internal/snapshot read), the
// one helper that writes the cluster (reconciler.go), the writes of a step
// (labels, stamps, deletes, forcing, the finalizer's removal), the one
// memory per cluster UID (state.go) and the teardown's record, through
// internal/record. It decides nothing itself: it writes what the plan's
// next step says, and only that. It may not write a cluster that is not
// being deleted, nor any object the plan does not name.
package teardown
