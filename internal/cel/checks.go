package cel

import (
	"encoding/json"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// The checks of what the schema cannot check, or what a policy stored
// before the schema refused it may hold.

func (c *compiler) checkStrategy(path *field.Path, s v1alpha1.RemoveStrategyType) {
	if !slices.Contains(v1alpha1.RemoveStrategyTypes, s) {
		c.errs = append(c.errs, field.NotSupported(path, s, v1alpha1.RemoveStrategyTypes))
	}
}

func (c *compiler) checkPrune(path *field.Path, b v1alpha1.PruneBehavior) {
	if !slices.Contains(v1alpha1.PruneBehaviors, b) {
		c.errs = append(c.errs, field.NotSupported(path, b, v1alpha1.PruneBehaviors))
	}
}

func (c *compiler) checkName(path *field.Path, name string, seen map[string]bool) {
	switch {
	case name == "":
		c.errs = append(c.errs, field.Required(path, "a name is required"))
	case seen[name]:
		c.errs = append(c.errs, field.Duplicate(path, name))
	}
	seen[name] = true
}

func (c *compiler) checkGVR(path *field.Path, gvr v1alpha1.GroupVersionResource) {
	if gvr.Version == "" {
		c.errs = append(c.errs, field.Required(path.Child("version"), "the API version is required"))
	}
	if gvr.Resource == "" {
		c.errs = append(c.errs, field.Required(path.Child("resource"), "the plural resource name is required, for example manifestworks"))
	}
}

func (c *compiler) checkManifests(path *field.Path, manifests []v1alpha1.Manifest) {
	for i, m := range manifests {
		p := path.Index(i)
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(m.Raw, &obj); err != nil {
			c.errs = append(c.errs, field.Invalid(p, string(m.Raw), "not a Kubernetes object: "+err.Error()))
			continue
		}
		if obj.APIVersion == "" {
			c.errs = append(c.errs, field.Required(p.Child("apiVersion"), ""))
		}
		if obj.Kind == "" {
			c.errs = append(c.errs, field.Required(p.Child("kind"), ""))
		}
		if obj.Metadata.Name == "" {
			c.errs = append(c.errs, field.Required(p.Child("metadata", "name"), ""))
		}
	}
}

// checkOutside checks a stage outside the cluster namespace: named
// namespaces, never every one, or cluster-scoped, not both; and a when,
// without which the stage would take every object of its resource there.
func (c *compiler) checkOutside(path *field.Path, st v1alpha1.DeletionStage) {
	for i, ns := range st.Namespaces {
		if ns == "" || ns == "*" {
			c.errs = append(c.errs, field.Invalid(path.Child("namespaces").Index(i), ns,
				"every namespace is never a stage's: name each namespace"))
		}
	}
	if len(st.Namespaces) > 0 && st.ClusterScoped {
		c.errs = append(c.errs, field.Invalid(path.Child("clusterScoped"), true, "a stage names namespaces or is clusterScoped, not both"))
	}
	if st.OutsideClusterNamespace() && strings.TrimSpace(st.When) == "" {
		c.errs = append(c.errs, field.Required(path.Child("when"),
			"a stage outside the cluster namespace (namespaces or clusterScoped) needs a when that selects the cluster's objects: without one it would delete every object of the resource there"))
	}
}
