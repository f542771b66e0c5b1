// Package metrics owns the operator's Prometheus metrics: the cluster
// series a teardown's state exports and drops, and the policy series. It
// keeps no map of clusters of its own and writes nothing to the API.
package metrics
