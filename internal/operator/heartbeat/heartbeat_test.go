package heartbeat

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLive: a heartbeat is live within three of its intervals, and one
// renewed ahead of this clock is live.
func TestLive(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		ago      time.Duration
		interval time.Duration
		live     bool
	}{
		{0, 20 * time.Second, true},
		{59 * time.Second, 20 * time.Second, true},
		{60 * time.Second, 20 * time.Second, false},
		{-10 * time.Second, 20 * time.Second, true},
		{50 * time.Second, 0, true}, // no interval: the default
		{2 * time.Minute, 0, false},
	} {
		b := Beat{Renewed: metav1.NewTime(now.Add(-c.ago)), Interval: metav1.Duration{Duration: c.interval}}
		if got := b.Live(now); got != c.live {
			t.Errorf("renewed %s ago every %s: Live = %v, want %v", c.ago, c.interval, got, c.live)
		}
	}
}

// TestName: the name is a DNS subdomain whatever the host is called.
func TestName(t *testing.T) {
	for identity, want := range map[string]string{
		"cleanup-operator-controller-manager-7d9f-x2x-1": NamePrefix + "cleanup-operator-controller-manager-7d9f-x2x-1",
		"My_Laptop.local-4242":                           NamePrefix + "my-laptop.local-4242",
		"__-1":                                           NamePrefix + "1",
	} {
		if got := Name(identity); got != want {
			t.Errorf("Name(%q) = %q, want %q", identity, got, want)
		}
	}
	if got := Name(strings.Repeat("a", 300)); len(got) != 253 {
		t.Errorf("a long identity gives a name of %d characters, want 253", len(got))
	}
}

// TestVersionOf: the module version Go stamped, else the VCS revision,
// "-dirty" when modified, else nothing.
func TestVersionOf(t *testing.T) {
	const rev = "be3de06e0c999482f43f697c8fae2fc2e7a57820"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-12-07T05:28:05Z"}, {Key: "vcs.modified", Value: modified}}
	}
	for _, c := range []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"a release", "v0.4.0", vcs("false"), "v0.4.0"},
		{"go build of a commit", "v0.0.0-20261207052805-be3de06e0c99+dirty", vcs("true"), "v0.0.0-20261207052805-be3de06e0c99+dirty"},
		{"a development build of a clean tree", "(devel)", vcs("false"), rev},
		{"a development build of a modified tree", "(devel)", vcs("true"), rev + "-dirty"},
		{"no module version", "", vcs("true"), rev + "-dirty"},
		{"go run", "(devel)", nil, ""},
		{"a modified tree without its revision", "(devel)", []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, ""},
	} {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/fleetops-dev/cleanup-operator", Version: c.version}, Settings: c.settings}
		if got := versionOf(info); got != c.want {
			t.Errorf("%s: versionOf = %q, want %q", c.name, got, c.want)
		}
	}
}
