// Package stamp owns the decisions the operator writes on objects it does
// not delete: spec.deleteOption on ManifestWorks (the one writer the
// teardown and governance call too, DeleteOption) and spec.pruneObjectBehavior
// on ConfigurationPolicies, through one generic reconciler (Reconciler[T])
// with an adapter per kind, and the prune decisions it publishes for OCM
// hub templates. It writes only the fields of its stamps and the
// annotation that records them, never forced over another manager.
package stamp
