package teardown

import "github.com/fleetops-dev/cleanup-operator/internal/record"

// RecordOptions say where teardown records are kept and for how long.
type RecordOptions struct {
	// Namespace is the operator's namespace (record.Namespace).
	Namespace string
	// Retention bounds the ended records kept.
	Retention record.Retention
}
