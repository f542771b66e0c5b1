// Package tally owns what the reconcilers count per policy for its status:
// the objects left alone because the operator did not create them, the
// stamps contested, failed or previewed in a dry run. It keeps counts in
// memory and writes nothing.
package tally
