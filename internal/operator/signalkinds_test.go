package operator

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
)

// TestNamespacedKinds: the operator starts only with signal kinds the hub
// serves as namespaced.
func TestNamespacedKinds(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, meta.RESTScopeRoot)
	limits := func(kinds ...string) admissionpolicy.SignalLimits {
		l := admissionpolicy.DefaultSignalLimits()
		l.Kinds = kinds
		return l
	}
	if err := namespacedKinds(mapper, admissionpolicy.DefaultSignalLimits()); err != nil {
		t.Fatalf("the default kinds: %v", err)
	}
	for _, c := range []struct {
		limits admissionpolicy.SignalLimits
		want   string
	}{
		{limits("v1/ConfigMap", "rbac.authorization.k8s.io/v1/ClusterRoleBinding"), "is cluster-scoped"},
		{limits("example.com/v1/Signal"), "the hub does not serve it"},
		{limits("ConfigMap"), "want apiVersion/Kind"},
		{admissionpolicy.SignalLimits{Kinds: []string{"v1/ConfigMap"}, MaxBytes: 0, MaxTotalBytes: 10}, "must be positive"},
	} {
		err := namespacedKinds(mapper, c.limits)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error saying %q", c.limits, err, c.want)
		}
	}
}
