package main

import (
	"errors"
	"fmt"
	"strings"
)

// The plugin's exit codes, in one place. They keep the meaning diff(1)
// gives codes (0 no differences, 1 differences, above 1 trouble): `kubectl
// cleanup diff` exits 1 for "differs" and uses 2 and above as here.
const (
	exitOK       = 0 // the command did what it was asked
	exitRefused  = 1 // a guard rail said no, or has not said yes: nothing was done
	exitDiffers  = 1 // diff: the proposed policies change something
	exitUsage    = 2 // the command line is wrong: unknown command or flag, bad argument or value
	exitNotFound = 3 // what the command names does not exist
	exitFailure  = 4 // the API server failed or refused a request, or anything else went wrong
	exitInvalid  = 5 // diff: a proposed policy is one admission would refuse
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
	{exitDiffers, "diff: the proposed CleanupPolicies change something (0: they change nothing)"},
	{exitUsage, "usage error: unknown command or flag, wrong number of arguments, a flag value out of its range"},
	{exitNotFound, "not found: the named ManagedCluster, teardown record or operator does not exist"},
	{exitFailure, "failure: the API server could not be reached, refused a request (e.g. forbidden) or failed"},
	{exitInvalid, "invalid: diff's proposed CleanupPolicy would be refused by admission (the message names the field)"},
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

// errDiffers is diff's outcome when something changes: not a failure.
var errDiffers = errors.New("the proposed CleanupPolicies change the decisions above")

// invalidPolicy is a proposed policy admission would refuse.
type invalidPolicy struct{ err error }

func (e *invalidPolicy) Error() string { return e.err.Error() }
func (e *invalidPolicy) Unwrap() error { return e.err }

// exitCode is the exit code of the error a command returned. ran says
// that the command line was parsed and the command started: an error
// before that (flags, arguments, unknown command) is a usage error.
func exitCode(err error, ran bool) int {
	var (
		usage    *usageError
		notFound *notFoundError
		refused  *refusal
		invalid  *invalidPolicy
	)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errDiffers):
		return exitDiffers
	case errors.As(err, &invalid):
		return exitInvalid
	case !ran || errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &refused):
		return exitRefused
	case errors.As(err, &notFound):
		return exitNotFound
	}
	return exitFailure
}
