// Package bench holds the benchmarks that run the operator against a real
// API server with a fleet of objects: `make bench`, never `make test`.
package bench
