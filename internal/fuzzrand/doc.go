// Package fuzzrand turns a fuzzer's bytes into random choices, for the
// fuzz tests of the policy compiler and of the teardown decision.
package fuzzrand
