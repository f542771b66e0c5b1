// Package governance owns the ManagedClusters not being deleted: it keeps a
// governed cluster under the operator's finalizer with its deletion-signal
// work and its namespace's mark, applies deletion protection, and lets go
// of a cluster no policy governs any more. A cluster being deleted is the
// teardown's (internal/teardown); governance never deletes.
package governance
