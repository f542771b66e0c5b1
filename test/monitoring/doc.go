// Package monitoring checks the operator's alerts (config/prometheus) and
// dashboard (config/grafana) against the metrics the operator exports: the
// alerting rules' unit tests run in promtool, and every query must parse
// and name only metrics and labels the operator's registry serves.
//
// It is a module of its own so that the Prometheus packages it needs never
// reach the operator's go.mod.
package monitoring
