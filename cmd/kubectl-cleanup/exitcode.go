package main

import (
	"errors"
	"fmt"
	"strings"
)

// The plugin's exit codes, in one place. 1 and every code above it keep
// the meaning diff(1) gives them free for a future `kubectl cleanup diff`
// (0 no differences, 1 differences, above 1 trouble): a command that
// compares would exit 1 for "differs" and use 2, 3 and 4 as here.
const (
	exitOK       = 0 // the command did what it was asked
	exitRefused  = 1 // a guard rail said no, or has not said yes: nothing was done
	exitUsage    = 2 // the command line is wrong: unknown command or flag, bad argument or value
	exitNotFound = 3 // what the command names does not exist
	exitFailure  = 4 // the API server failed or refused a request, or anything else went wrong
)

// exitCodes documents the codes in the help and the CLI reference.
var exitCodes = []struct {
	code int
	what string
}{
	{exitOK, "success"},
	{exitRefused, "refused: a guard rail said no or has not said yes (uninstall with the operator running or a teardown in " +
		"progress; confirm-delete of a cluster not protected from deletion, or not accepted in time; release with no teardown held); " +
		"nothing was changed"},
	{exitUsage, "usage error: unknown command or flag, wrong number of arguments, a flag value out of its range"},
	{exitNotFound, "not found: the named ManagedCluster, teardown record or operator does not exist"},
	{exitFailure, "failure: the API server could not be reached, refused a request (e.g. forbidden) or failed"},
}

// exitCodesHelp is the "Exit status" section of the root command's help.
func exitCodesHelp() string {
	var b strings.Builder
	b.WriteString("Exit status:\n")
	for _, c := range exitCodes {
		line := fmt.Sprintf("  %d ", c.code)
		for _, word := range strings.Fields(c.what) {
			if len(line)+1+len(word) > 78 {
				b.WriteString(line + "\n")
				line = "    "
			}
			line += " " + word
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// usageError is a command line the plugin cannot run.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// notFoundError is the absence of what the command names.
type notFoundError struct{ err error }

func (e *notFoundError) Error() string { return e.err.Error() }
func (e *notFoundError) Unwrap() error { return e.err }

func notFoundf(format string, args ...any) error {
	return &notFoundError{err: fmt.Errorf(format, args...)}
}

// refusal is the error of a refusal; its message says why and what to do.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// exitCode is the exit code of the error a command returned. ran says
// that the command line was parsed and the command started: an error
// before that (flags, arguments, unknown command) is a usage error.
func exitCode(err error, ran bool) int {
	var (
		usage    *usageError
		notFound *notFoundError
		refused  *refusal
	)
	switch {
	case err == nil:
		return exitOK
	case !ran || errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &refused):
		return exitRefused
	case errors.As(err, &notFound):
		return exitNotFound
	}
	return exitFailure
}
