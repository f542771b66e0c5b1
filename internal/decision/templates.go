package decision

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// RootPolicyLabel names, on a replicated Policy, its root: <namespace>.<name>.
const RootPolicyLabel = "policy.open-cluster-management.io/root-policy"

// Template is a ConfigurationPolicy template of a root Policy.
type Template struct {
	Name       string
	Definition map[string]any
}

// Templates are the ConfigurationPolicy templates of a root Policy.
func Templates(root *unstructured.Unstructured) []Template {
	raw, _, _ := unstructured.NestedSlice(root.Object, "spec", "policy-templates")
	var out []Template
	for _, t := range raw {
		m, _ := t.(map[string]any)
		def, _ := m["objectDefinition"].(map[string]any)
		if kind, _ := def["kind"].(string); kind != "ConfigurationPolicy" {
			continue
		}
		md, _ := def["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		if name != "" {
			out = append(out, Template{Name: name, Definition: def})
		}
	}
	return out
}

// DecisionHubTemplate is the line of a ConfigurationPolicy template that
// reads its pruneObjectBehavior from the decisions ConfigMap, through a hub
// template the policy propagator resolves for each cluster.
func DecisionHubTemplate(template string) string {
	return fmt.Sprintf(`pruneObjectBehavior: '{{hub fromConfigMap .PolicyMetadata.namespace "%s" (printf "%%s.%%s" .ManagedClusterName "%s") | default "None" hub}}'`,
		v1alpha1.DecisionsConfigMap, template)
}

// ReadsDecisions reports whether a template takes its pruneObjectBehavior
// from the decisions ConfigMap.
func ReadsDecisions(definition map[string]any) bool {
	v, _, _ := unstructured.NestedString(definition, "spec", "pruneObjectBehavior")
	return strings.Contains(v, v1alpha1.DecisionsConfigMap)
}
