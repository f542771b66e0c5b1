// Package v1alpha1 holds the CleanupPolicy validating webhook, which runs the
// same compile as the reconciler.
package v1alpha1
