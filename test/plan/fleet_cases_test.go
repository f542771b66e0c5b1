package plan

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// TestGenerateReplays checks that a seed replays: the same seed draws the
// same fleet.
func TestGenerateReplays(t *testing.T) {
	for seed := range uint64(50) {
		a, b := generate(seed, "x", 4), generate(seed, "x", 4)
		if a.describe() != b.describe() || !reflect.DeepEqual(a.policies, b.policies) {
			t.Fatalf("seed %d drew two fleets:%s\n---%s", seed, a.describe(), b.describe())
		}
		for i := range a.clusters {
			if !reflect.DeepEqual(a.clusters[i].objects, b.clusters[i].objects) {
				t.Fatalf("seed %d drew two contents for %s", seed, a.clusters[i].name)
			}
		}
	}
}

// TestGenerateCovers checks what every fleet holds (a BestEffort cluster
// that is unavailable, never another one unavailable) and what some seeds
// of a few hold.
func TestGenerateCovers(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(200) {
		f := generate(seed, "x", 3)
		unavailable := 0
		for _, c := range f.clusters {
			if c.available {
				continue
			}
			if c.strategy != v1alpha1.RemoveStrategyBestEffort || c.dryRun() || c.policy == nil {
				t.Fatalf("seed %d: only a BestEffort cluster, not in dry run, may be unavailable: %s", seed, c)
			}
			unavailable++
		}
		if unavailable == 0 {
			t.Fatalf("seed %d: no BestEffort cluster is unavailable:%s", seed, f.describe())
		}
		for _, c := range f.clusters {
			if c.policy == nil {
				seen["no policy"] = true
				continue
			}
			s := c.policy.Spec
			seen[string(c.strategy)] = true
			seen[fmt.Sprintf("dry run %t", s.DryRun)] = true
			seen[fmt.Sprintf("custom stages %t", len(s.DeletionStages) > 0)] = true
			seen[fmt.Sprintf("signal %t", s.DeletionSignal != nil)] = true
			seen[fmt.Sprintf("kept namespace %t", s.KeepNamespace != "" && c.keep)] = true
			seen[fmt.Sprintf("monitored %t", len(s.MonitoredResources) > 0)] = true
			seen[fmt.Sprintf("orphaning rules %t", len(s.Orphaning) > 0)] = true
		}
	}
	for _, want := range []string{"Required", "BestEffort", "Needless", "no policy", "dry run true", "dry run false",
		"custom stages true", "custom stages false", "signal true", "signal false", "kept namespace true", "kept namespace false",
		"monitored true", "monitored false", "orphaning rules true", "orphaning rules false"} {
		if !seen[want] {
			t.Errorf("no cluster of 200 seeds has %s", want)
		}
	}
}
