// Package e2e runs cleanup-operator end to end against OCM's own components:
// the registration hub controllers and the work agent of cluster1 run in
// this process on a real kube-apiserver, the governance-policy-propagator as
// a process of its own (./cmd/propagator), kube-controller-manager runs its
// namespace and garbage-collector controllers, and the operator runs as the
// bin/manager process. The hub and the managed cluster are the same API
// server. See README.md.
package e2e
