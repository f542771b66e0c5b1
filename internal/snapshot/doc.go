// Package snapshot reads what the decisions take: the CleanupPolicies,
// compiled, and the ManagedCluster, for governance. The operator reads
// through its cache and the command-line preview through a live client;
// both hand what they read to the pure functions of internal/decision.
package snapshot
