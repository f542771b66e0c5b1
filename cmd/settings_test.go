package main

import (
	"flag"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/settings"
)

// parse binds the manager's flags to a new flag set and parses args.
func parse(t *testing.T, args ...string) flags {
	t.Helper()
	var f flags
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	f.bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSettingsDefaults: the settings the plugin assumes when it cannot read
// the operator's are those the binary publishes when run without flags.
func TestSettingsDefaults(t *testing.T) {
	opts, err := parse(t).options()
	if err != nil {
		t.Fatal(err)
	}
	got, want := operator.SettingsOf(opts), settings.Defaults(record.Namespace(""))
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("the flags' defaults publish\n%+v\nthe plugin assumes\n%+v", got, want)
	}
	opts, err = parse(t, "--blast-radius-max-teardowns=10%", "--max-concurrent-teardowns=2", "--namespace-deny=argocd").options()
	if err != nil {
		t.Fatal(err)
	}
	s := operator.SettingsOf(opts)
	if s.BlastRadius.MaxTeardowns.String() != "10%" || *s.BlastRadius.MaxConcurrent != 2 || strings.Join(s.NamespaceDeny, ",") != "argocd" {
		t.Errorf("the flags are not in the settings: %+v", s)
	}
}

// TestWindowLongerThanRecords: the operator refuses to start with a
// default window longer than the records are kept, naming both flags.
func TestWindowLongerThanRecords(t *testing.T) {
	_, err := parse(t, "--blast-radius-window=48h", "--teardown-record-max-age=24h").options()
	if err == nil || !strings.Contains(err.Error(), "--blast-radius-window 48h0m0s") || !strings.Contains(err.Error(), "--teardown-record-max-age 24h0m0s") {
		t.Errorf("error %v, want one naming both flags", err)
	}
	for _, ok := range [][]string{{"--blast-radius-window=24h", "--teardown-record-max-age=24h"}, {"--blast-radius-window=48h", "--teardown-record-max-age=0"}} {
		if _, err := parse(t, ok...).options(); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
}
