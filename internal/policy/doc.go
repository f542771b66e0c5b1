// Package policy owns the CleanupPolicy reconciler: it compiles each
// policy, reports in its status what it matches, governs and holds, keeps
// the in-use finalizer while a cluster it governs is being torn down, and
// paces what a policy's share of the fleet may write. It writes only
// CleanupPolicies.
package policy
