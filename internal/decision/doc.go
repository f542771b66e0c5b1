// Package decision takes the decisions of compiled CleanupPolicies: which
// policy governs a cluster (Resolve), and what its deletion does: the
// teardown Plan (PlanTeardown), from a Snapshot. It makes no API calls, so
// the operator and the command-line preview share it.
package decision
