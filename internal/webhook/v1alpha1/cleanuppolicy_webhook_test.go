package v1alpha1

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

func TestValidator(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	v := &CleanupPolicyValidator{Env: env}
	broken := &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"}},
		Spec: v1alpha1.CleanupPolicySpec{
			ClusterSelector: "size(cluster.metadata.labels)",
			RemoveStrategy:  v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		}}

	_, err = v.ValidateCreate(context.Background(), broken)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.clusterSelector") {
		t.Fatalf("create: got %v, want Invalid naming spec.clusterSelector", err)
	}

	// A policy that no longer compiles (its CRD changed) can still be
	// relabelled or have its finalizers removed.
	relabelled := broken.DeepCopy()
	relabelled.Labels = nil
	if _, err := v.ValidateUpdate(context.Background(), broken, relabelled); err != nil {
		t.Fatalf("update without a spec change refused: %v", err)
	}

	fixed := broken.DeepCopy()
	fixed.Spec.ClusterSelector = "cluster.metadata.name == 'a'"
	w, err := v.ValidateUpdate(context.Background(), broken, fixed)
	if err != nil {
		t.Fatalf("valid update refused: %v", err)
	}
	if len(w) != 1 || !strings.Contains(w[0], "`cluster` is not type-checked") {
		t.Fatalf("warnings %q: want one saying cluster is not type-checked", w)
	}
	if _, err := v.ValidateDelete(context.Background(), broken); err != nil {
		t.Fatal(err)
	}
}
