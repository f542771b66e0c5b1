// Package docs keeps the documentation true: every CleanupPolicy shown in a
// YAML block of the README and of docs/ decodes strictly and compiles with
// the operator's compiler, every relative link points to a file that exists,
// and what the pages quote of the code is the code's: log lines, admission
// policies (names and count), manager and plugin flags, metric names and
// condition and Event reasons; every manager flag, metric and reason is
// documented on its page.
package docs
