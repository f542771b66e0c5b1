// Package repo checks what the repository may hold: no path of one build
// machine in a tracked file, and no module replaced by a directory that is
// not the repository's own code.
package repo
