// Package decision takes the decisions of compiled CleanupPolicies: which
// policy governs a cluster, and what its deletion does. It makes no API
// calls, so the operator and the command-line preview share it.
package decision
