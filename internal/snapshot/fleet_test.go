package snapshot_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// TestFleetCountsAcceptedClusters: the base of a percentage budget is the
// clusters the policy governs that OCM accepted; clusters created but not
// accepted, which whoever may create ManagedClusters can add, do not raise
// it.
func TestFleetCountsAcceptedClusters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := k8s

	for i, accepted := range []bool{true, true, false, false, false} {
		mc := snapshot.NewManagedCluster()
		mc.SetName(fmt.Sprintf("f%d", i))
		mc.SetFinalizers([]string{v1alpha1.ClusterCleanupFinalizer})
		mc.SetAnnotations(map[string]string{v1alpha1.GoverningPolicyAnnotation: "p"})
		g.Expect(unstructured.SetNestedField(mc.Object, accepted, "spec", "hubAcceptsClient")).To(Succeed())
		g.Expect(c.Create(ctx, mc)).To(Succeed())
	}
	deleted := snapshot.NewManagedCluster()
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "f0"}, deleted)).To(Succeed())
	g.Expect(c.Delete(ctx, deleted)).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "f0"}, deleted)).To(Succeed())

	celEnv, err := cel.NewEnv(cel.Schemas{})
	g.Expect(err).NotTo(HaveOccurred())
	half := intstr.FromString("50%")
	p, errs := cel.Compile(celEnv, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: v1alpha1.CleanupPolicySpec{
		RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		BlastRadius:    &v1alpha1.BlastRadius{MaxTeardowns: &half},
	}})
	g.Expect(errs).To(BeEmpty())
	r := &snapshot.Reader{Client: c, Mapper: c.RESTMapper(), APIReader: c}
	s, err := r.Read(ctx, &decision.Governed{Cluster: deleted, Policy: p}, decision.Memory{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Fleet).NotTo(BeNil())
	g.Expect(s.Fleet.Governed).To(Equal(2), "the three clusters OCM did not accept are not counted")
	g.Expect(s.Fleet.Deleting).To(HaveLen(1))
	g.Expect(decision.BudgetOf(p.Spec.BlastRadius, s.Fleet.Default, s.Fleet.Governed).MaxTeardowns).To(Equal(1))
}
