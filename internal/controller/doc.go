// Package controller holds the operator's reconcilers: the CleanupPolicy
// reconciler, which compiles policies and reports what they govern.
package controller
