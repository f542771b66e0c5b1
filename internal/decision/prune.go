package decision

import (
	"strings"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// PruneBehavior decides a ConfigurationPolicy's pruneObjectBehavior: the
// first rule whose `when` is true, else the default (None when unset). ""
// means the policy decides nothing (it has no prune section).
func PruneBehavior(p *cel.Policy, a *cel.Activation, configurationPolicy map[string]any) (v1alpha1.PruneBehavior, error) {
	pr := p.Spec.Prune
	if pr == nil {
		return "", nil
	}
	pa := a.With(cel.VarPolicy, configurationPolicy)
	for i, rule := range pr.Rules {
		ok, err := p.PruneRules[i].Bool(pa)
		if err != nil {
			return "", err
		}
		if ok {
			return rule.Behavior, nil
		}
	}
	if pr.Default == "" {
		return v1alpha1.PruneNone, nil
	}
	return pr.Default, nil
}

// Ineffective reports whether a behaviour has no effect on a policy: pruning
// needs remediationAction enforce.
func Ineffective(b v1alpha1.PruneBehavior, configurationPolicy map[string]any) bool {
	spec, _ := configurationPolicy["spec"].(map[string]any)
	action, _ := spec["remediationAction"].(string)
	return b != "" && b != v1alpha1.PruneNone && strings.EqualFold(action, "inform")
}
