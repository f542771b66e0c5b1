// Package snapshot reads what the decisions take, and hands it to the pure
// functions of internal/decision: the CleanupPolicies, compiled, and the
// ManagedCluster, for governance (Reader.Govern); everything a deleted
// cluster's teardown decision needs, as a decision.Snapshot (Reader.Read).
// The operator reads through its cache and the command-line preview
// through a live client: one reader for both.
package snapshot
