// Package cel compiles and evaluates the CEL expressions of a CleanupPolicy:
// one environment with the Kubernetes CEL libraries, variables typed from the
// real schemas, cost bounds at compile and run time, and a cache of compiled
// policies by (UID, generation). It imports no controller-runtime.
package cel
