// Package watch owns the operator's watches of kinds a hub may not serve:
// it turns the controllers of an optional kind on and off as the kind's
// CRD comes and goes, without a restart, and says which kinds are off. It
// decides nothing about clusters or policies and writes nothing.
package watch
