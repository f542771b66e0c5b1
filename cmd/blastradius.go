package main

import (
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// blastRadiusFlags are the operator-wide blast radius, used where a policy
// sets no spec.blastRadius field of its own.
type blastRadiusFlags struct {
	maxTeardowns  string
	window        time.Duration
	maxConcurrent int
}

func (b *blastRadiusFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&b.maxTeardowns, "blast-radius-max-teardowns", "",
		"How many teardowns of a policy's clusters may begin within --blast-radius-window, a count (5) or a share of the "+
			"clusters the policy governs (10%), where the policy sets no spec.blastRadius.maxTeardowns; empty: no bound.")
	fs.DurationVar(&b.window, "blast-radius-window", v1alpha1.DefaultBlastRadiusWindow.Duration,
		"The window of --blast-radius-max-teardowns, where the policy sets no spec.blastRadius.window.")
	fs.IntVar(&b.maxConcurrent, "max-concurrent-teardowns", 0,
		"How many teardowns of a policy's clusters may be in progress at once, where the policy sets no "+
			"spec.blastRadius.maxConcurrent; 0: no bound.")
}

var shareFlag = regexp.MustCompile(`^(100|[1-9]?[0-9])%$`)

// budget is the operator-wide budget the flags set, or an error naming the
// flag that is wrong.
func (b *blastRadiusFlags) budget() (v1alpha1.BlastRadius, error) {
	out := v1alpha1.BlastRadius{Window: &metav1.Duration{Duration: b.window}}
	if b.window <= 0 {
		return out, fmt.Errorf("--blast-radius-window must be a positive duration, not %s", b.window)
	}
	if b.maxConcurrent < 0 {
		return out, fmt.Errorf("--max-concurrent-teardowns must be 0 (no bound) or more, not %d", b.maxConcurrent)
	}
	if b.maxConcurrent > 0 {
		n := int32(b.maxConcurrent)
		out.MaxConcurrent = &n
	}
	switch n, err := strconv.Atoi(b.maxTeardowns); {
	case b.maxTeardowns == "":
	case err == nil && n >= 0:
		v := intstr.FromInt32(int32(n))
		out.MaxTeardowns = &v
	case shareFlag.MatchString(b.maxTeardowns):
		v := intstr.FromString(b.maxTeardowns)
		out.MaxTeardowns = &v
	default:
		return out, fmt.Errorf("--blast-radius-max-teardowns must be a count of 0 or more or a percentage from 0%% to 100%%, not %q", b.maxTeardowns)
	}
	return out, nil
}
