package controller_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

var _ = Describe("CleanupPolicy counts", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("writes 0 matched and governed for a policy that matches nothing, and kubectl get prints them", func() {
		Expect(k8s.Create(ctx, managedCluster("counts-dev", map[string]string{"env": "dev"}))).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("counts-none", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'none'",
		}))).To(Succeed())
		Eventually(storedCounts("counts-none")).Should(Equal(map[string]any{"matchedClusters": int64(0), "governedClusters": int64(0)}))
		Expect(printedColumns("counts-none", "READY", "MATCHED", "GOVERNED")).To(Equal([]string{"True", "0", "0"}))

		By("writing them once into a status that lacks them, though no count changed")
		Expect(k8s.Status().Patch(ctx, cleanupPolicy("counts-none", v1alpha1.CleanupPolicySpec{}), client.RawPatch(types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/status/matchedClusters"},{"op":"remove","path":"/status/governedClusters"}]`)))).To(Succeed())
		Expect(storedCounts("counts-none")()).To(BeEmpty())
		// A cluster's change makes every policy count again.
		mc := getClusterNow("counts-dev")
		mc.SetLabels(map[string]string{"env": "dev", "team": "a"})
		Expect(k8s.Update(ctx, mc)).To(Succeed())
		Eventually(storedCounts("counts-none")).Should(Equal(map[string]any{"matchedClusters": int64(0), "governedClusters": int64(0)}))
		Expect(printedColumns("counts-none", "READY", "MATCHED", "GOVERNED")).To(Equal([]string{"True", "0", "0"}))
	})
})

// storedCounts reads the printed counts a policy's stored status holds, as
// stored: a count absent is absent from the map.
func storedCounts(name string) func() map[string]any {
	return func() map[string]any {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("CleanupPolicy"))
		Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, u)).To(Succeed())
		got := map[string]any{}
		for _, field := range []string{"matchedClusters", "governedClusters"} {
			if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", field); found {
				got[field] = v
			}
		}
		return got
	}
}

// printedColumns runs `kubectl get fcpol NAME -o wide` and returns the
// cells of the named columns, read at their header's position, so that a
// blank cell reads as "".
func printedColumns(name string, columns ...string) []string {
	lines := strings.Split(strings.TrimRight(kubectl(nil, "get", "fcpol", name, "-o", "wide"), "\n"), "\n")
	Expect(lines).To(HaveLen(2), "kubectl get fcpol %s -o wide", name)
	header, row := lines[0], lines[1]
	var cells []string
	for _, col := range columns {
		at := strings.Index(header, col)
		Expect(at).To(BeNumerically(">=", 0), "no column %s in %q", col, header)
		cell := "" // blank: nothing begins under the header
		if at < len(row) && row[at] != ' ' {
			cell = strings.Fields(row[at:])[0]
		}
		cells = append(cells, cell)
	}
	return cells
}
