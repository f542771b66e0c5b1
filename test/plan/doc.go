// Package plan proves that `kubectl cleanup plan` tells what the operator
// does: for generated fleets, the writes the plan of a cluster lists before
// the cluster is deleted are the writes the operator makes tearing it down.
package plan
