// Package record owns the teardown record: what one cluster teardown did,
// object by object, kept in a ConfigMap in the operator's namespace so that
// it outlives the cluster, its namespace and the operator's restarts.
package record
