// Package record owns the teardown record: what one cluster teardown did,
// object by object, kept in a ConfigMap in the operator's namespace so that
// it outlives the cluster, its namespace and the operator's restarts. Its
// Writer decides what a record says and when it is written (the entries
// intended before a write and done after it, the holds, the end, what a
// restart left unresolved, whether a namespace's label was the operator's);
// the teardown only calls it. It reads the plans of internal/decision and
// writes nothing but the records' ConfigMaps.
package record
