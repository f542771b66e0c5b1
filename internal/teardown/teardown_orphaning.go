package teardown

import (
	"context"
	"fmt"

	"github.com/fleetops-dev/cleanup-operator/internal/stamp"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// stampAll gives each work the deleteOption the plan stamps, and returns
// the generation each stamped work now has. A stamp that meets another
// manager's deleteOption, or fails, is returned as a hold; a work replaced
// or changed meanwhile is left to its event.
func (a *ClusterTeardown) stampAll(ctx context.Context, s *decision.Snapshot, acts []decision.Action) (map[types.UID]int64, []string) {
	var holds []string
	stamped := map[types.UID]int64{}
	for _, act := range acts {
		w := s.Works[act.UID]
		if w == nil {
			continue
		}
		want := *act.Option
		result, why, err := stamp.DeleteOption(ctx, a.Client, a.APIReader, a.Metrics, &w.ObjectMeta, want)
		switch {
		case err == nil && result.Written():
			stamped[w.UID] = int64(result)
		case err != nil:
			holds = append(holds, fmt.Sprintf("%s: setting spec.deleteOption %s failed: %v", actionKey(act), want.Describe(), err))
		case result == stamp.Conflict:
			holds = append(holds, fmt.Sprintf("%s: another manager owns spec.deleteOption (%s: %s); the policy requires %s",
				actionKey(act), decision.CurrentDeleteOption(w).Describe(), why, want.Describe()))
		}
	}
	return stamped, holds
}
