// Package badinput feeds the operator bad CleanupPolicies on a real API
// server: a catalogue of bad values for every field, with the webhook in
// the path and without it, and a stored policy the operator cannot decode.
package badinput
