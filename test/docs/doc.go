// Package docs keeps the documentation true: every CleanupPolicy shown in a
// YAML block of the README and of docs/ decodes strictly and compiles with
// the operator's compiler, and every relative link points to a file that exists.
package docs
