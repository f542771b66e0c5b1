package badinput

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"
)

// The operator caches ManifestWorks typed. That is safe only while OCM's
// ManifestWork schema refuses every value the typed decode cannot read:
// times that are not RFC 3339, integers past their format, values of
// another type. This pins it: should a new OCM schema let such a value
// through, this fails, and works must then be read as policies are.
var _ = Describe("OCM's ManifestWork schema", func() {
	It("refuses what the operator's typed decode of a work cannot read", func() {
		const ns = "default"
		w := manifestWork(ns, "typed-decode-probe")
		Expect(unstructured.SetNestedSlice(w.Object, []any{}, "spec", "workload", "manifests")).To(Succeed())
		Expect(k8s.Create(ctx, w)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, w))).To(Succeed()) })

		setStatus := func(status map[string]any) error {
			u := manifestWork(ns, w.GetName())
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
			u.Object["status"] = status
			return k8s.Status().Update(ctx, u)
		}
		condition := func(at string) map[string]any {
			return map[string]any{"conditions": []any{map[string]any{
				"type": "Applied", "status": "True", "reason": "Applied", "message": "m", "lastTransitionTime": at,
			}}}
		}
		for _, at := range []string{"2026-01-02T03:04:05", "2026-01-02 03:04:05Z", "2026-01-02T03:04:05.000+0100", "yesterday"} {
			Expect(setStatus(condition(at))).To(MatchError(ContainSubstring("lastTransitionTime")), "time %q", at)
		}
		Expect(setStatus(map[string]any{"resourceStatus": map[string]any{"manifests": []any{map[string]any{
			"resourceMeta": map[string]any{"ordinal": int64(1) << 40}, "conditions": []any{},
		}}}})).To(MatchError(ContainSubstring("ordinal")))
		Expect(setStatus(map[string]any{"resourceStatus": map[string]any{"manifests": []any{map[string]any{
			"resourceMeta": map[string]any{"ordinal": "first"}, "conditions": []any{},
		}}}})).To(MatchError(ContainSubstring("ordinal")))

		// What the schema lets through, the typed list reads.
		Expect(setStatus(condition(time.Now().UTC().Format(time.RFC3339)))).To(Succeed())
		var works workv1.ManifestWorkList
		Expect(k8s.List(ctx, &works)).To(Succeed())
	})
})
