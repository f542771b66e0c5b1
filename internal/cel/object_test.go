package cel_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// TestFastAdapterMatchesLibrary evaluates expressions over every typed
// variable twice: as the operator binds the objects, and through the API
// server library's adapter alone. The values, errors and costs must be the
// same, for field selection, presence tests, escaped names, null fields,
// fields the schema does not know, embedded resources, iteration and
// equality.
func TestFastAdapterMatchesLibrary(t *testing.T) {
	c := cluster("c1", map[string]any{"env": "prod"})
	c["metadata"].(map[string]any)["creationTimestamp"] = "2026-01-01T00:00:00Z"
	c["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u", "controller": true}}
	c["spec"].(map[string]any)["taints"] = nil
	c["status"].(map[string]any)["extra"] = int64(1) // unknown to the schema
	c["status"].(map[string]any)["capacity"] = map[string]any{"cpu": int64(4), "memory": "16Gi"}
	c["status"].(map[string]any)["version"] = map[string]any{"kubernetes": "v1.37.0"}
	c["status"].(map[string]any)["clusterClaims"] = []any{map[string]any{"name": "id.k8s.io", "value": "x"}}
	manifest := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}, "data": map[string]any{"k": "v"}}
	work := map[string]any{"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
		"metadata": map[string]any{"name": "w", "namespace": "c1", "labels": map[string]any{"a": "b"}},
		"spec":     map[string]any{"workload": map[string]any{"manifests": []any{manifest, map[string]any{"kind": "Secret"}}}}}
	policyObj := map[string]any{"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy", "metadata": map[string]any{"name": "cp"},
		"spec": map[string]any{"remediationAction": "enforce", "unknownField": "x",
			"object-templates": []any{map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{"kind": "Pod"}}}}}
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "c1"}, "status": map[string]any{"phase": "Active"}}
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "o", "namespace": "c1", "finalizers": []any{"f"}}}

	// Variables take any type: they see the cluster. (A map's keys come in
	// no fixed order: a comprehension over them that may stop early costs
	// what the order makes it cost, so those here run to the end.)
	clusterExprs := []string{
		"cluster", "cluster.metadata", "cluster.metadata.name", "cluster.metadata.labels", "cluster.metadata.annotations",
		"has(cluster.spec)", "has(cluster.spec.taints)", "cluster.spec.taints", "cluster.spec.?taints.orValue([])",
		"cluster.status.conditions.exists(c, c.type == 'ManagedClusterConditionAvailable')",
		"cluster.status.conditions.map(c, c.type)", "cluster.status.conditions[0]",
		"cluster.status.conditions[0] == cluster.status.conditions[0]", "cluster.status.conditions == cluster.status.conditions",
		"cluster.metadata == cluster.metadata", "cluster == cluster", "cluster.status == cluster.status", "cluster.spec != cluster.spec",
		"dyn(cluster.metadata).exists_one(k, k == 'name')", "dyn(cluster.metadata).all(k, k != '')", "dyn(cluster.spec).exists_one(k, k == 'hubAcceptsClient')",
		"size(dyn(cluster.metadata))", "size(dyn(cluster.status))", "'spec' in dyn(cluster)", "'extra' in dyn(cluster.status)", "dyn(cluster.status)['extra']",
		"cluster.status.capacity", "cluster.status.capacity['cpu']", "cluster.metadata.creationTimestamp",
		"cluster.metadata.ownerReferences[0].controller", "cluster.metadata.ownerReferences[0]",
		"cluster.status.version.kubernetes", "cluster.status.clusterClaims.exists(c, c.name.startsWith('id'))",
		"cluster.status.conditions.all(c, c.lastTransitionTime < timestamp('2027-01-01T00:00:00Z'))",
		"cluster.metadata.labels[?'env']", "cluster.?status.?version.?kubernetes", "type(cluster.metadata)",
		"cluster.status.conditions + cluster.status.conditions", "size(cluster.status.conditions + cluster.status.conditions)",
		"cluster.status.conditions[0] in cluster.status.conditions", "dyn({'type': 'x'}) in cluster.status.conditions", "cluster.status.conditions[5]", "size(cluster.status.conditions)",
		"cluster.status.conditions.map(c, c)", "cluster.status.conditions.filter(c, c.status == 'True')", "cluster.status.conditions[?0]",
		"cluster.metadata.ownerReferences[0] in cluster.metadata.ownerReferences", "cluster.metadata.ownerReferences + []",
		"cluster.spec.managedClusterClientConfigs", "cluster.metadata.finalizers", "dyn(cluster.status.conditions)[dyn(0.0)]",
		"type(cluster.status.conditions)", "cluster.status.conditions.exists_one(c, c.type != '')",
	}
	work0 := "work.spec.workload.manifests[0]"
	bools := map[string][]string{
		"orphaning": {
			"work.spec.workload.manifests.exists(m, m.kind == 'ConfigMap')", work0 + ".metadata.name == 'cm'",
			work0 + " == " + work0, "has(dyn(" + work0 + ").data)", "work.metadata.labels.all(k, k != '')",
			"work.spec.workload == work.spec.workload", "work.spec == work.spec", "work.metadata.namespace == cluster.metadata.name",
			"manifest.data.k == 'v'", "has(manifest.spec)", "work.spec.workload.manifests[1].metadata.name == ''",
			"work.spec.workload.manifests.all(m, has(m.metadata))", "work.spec.workload.manifests + work.spec.workload.manifests == work.spec.workload.manifests",
			"work.spec.workload.manifests[0] in work.spec.workload.manifests", "work.spec.workload.manifests.exists_one(m, m.kind == 'Secret')", "size(dyn(work.spec.workload.manifests[0])) == 4",
		},
		"prune": {
			"policy.spec.object__dash__templates.size() > 0", "has(policy.spec.object__dash__templates)",
			"dyn(policy.spec).exists_one(k, k == 'object__dash__templates')", "policy.spec.object__dash__templates[0].complianceType == 'musthave'",
			"policy.spec == policy.spec", "policy.spec.object__dash__templates[0] == policy.spec.object__dash__templates[0]",
			"has(dyn(policy.spec).unknownField)", "'object__dash__templates' in dyn(policy.spec)", "'object-templates' in dyn(policy.spec)", "size(dyn(policy.spec)) == 3",
		},
		"keepNamespace": {"namespace.metadata.name == 'c1' && namespace.status.phase == 'Active'", "namespace.metadata == namespace.metadata"},
		"stage": {"object.metadata.finalizers.exists(f, f == 'f')", "object.metadata.name == 'o'", "object == object", "has(object.metadata.labels)",
			"object.metadata.labels == object.metadata.annotations", "object.metadata == object.metadata", "size(dyn(object.metadata)) == 5"},
	}

	check := func(t *testing.T, e *cel.Expression, src string, a *cel.Activation) {
		t.Helper()
		val, cost, err := e.EvalCost(a)
		libVal, libCost, libErr := e.EvalCost(a.LibraryAdapted(cel.NewBudget(cel.ReconcileCostBudget)))
		switch {
		case (err == nil) != (libErr == nil) || err != nil && err.Error() != libErr.Error():
			t.Fatalf("%s: error %v here, %v through the library's adapter", src, err, libErr)
		case cost != libCost:
			t.Fatalf("%s: cost %d here, %d through the library's adapter", src, cost, libCost)
		case err == nil && !sameVal(val, libVal):
			t.Fatalf("%s: %v here, %v through the library's adapter", src, val, libVal)
		}
	}
	ctx := context.Background()
	// Without labels or annotations, or without metadata, the object has
	// them as empty maps.
	bare := cluster("c2", nil)
	bare["metadata"].(map[string]any)["annotations"] = nil
	noMetadata := cluster("c3", nil)
	delete(noMetadata, "metadata")
	clusterExprs = append(clusterExprs, "cluster.metadata.labels == {}", "size(cluster.metadata.annotations) == 0",
		"has(cluster.metadata.labels) && has(cluster.metadata.annotations)", "size(dyn(cluster)) > 0")
	for name, c := range map[string]map[string]any{"labelled": c, "bare": bare, "no metadata": noMetadata} {
		for _, src := range clusterExprs {
			t.Run(name+"/"+src, func(t *testing.T) {
				p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
					s.Variables = []v1alpha1.Variable{{Name: "v", Expression: src}}
				})
				check(t, p.Variables[0], src, p.Bind(ctx, cel.NewBudget(cel.ReconcileCostBudget), c))
			})
		}
	}
	for field, exprs := range bools {
		for _, src := range exprs {
			t.Run(field+"/"+src, func(t *testing.T) {
				p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
					switch field {
					case "orphaning":
						s.Orphaning = []v1alpha1.OrphaningRule{{Name: "r", When: src}}
					case "prune":
						s.Prune = &v1alpha1.Prune{Rules: []v1alpha1.PruneRule{{When: src, Behavior: v1alpha1.PruneDeleteAll}}}
					case "keepNamespace":
						s.KeepNamespace = src
					case "stage":
						s.DeletionStages = []v1alpha1.DeletionStage{{Name: "s", GroupVersionResource: gvr("manifestworks"), When: src}}
					}
				})
				a := p.Bind(ctx, cel.NewBudget(cel.ReconcileCostBudget), c)
				var e *cel.Expression
				switch field {
				case "orphaning":
					e, a = p.Orphaning[0], a.With(cel.VarWork, work).With(cel.VarManifest, manifest)
				case "prune":
					e, a = p.PruneRules[0], a.With(cel.VarPolicy, policyObj)
				case "keepNamespace":
					e, a = p.KeepNamespace, a.With(cel.VarNamespace, ns)
				case "stage":
					e, a = p.StageWhen[0], a.With(cel.VarObject, obj)
				}
				check(t, e, src, a)
			})
		}
	}
	// A manifest has no schema: it is read in place, with the metadata
	// maps it lacks, as the library's dynamic map of a copy that has them.
	manifestExprs := []string{
		"manifest.kind == 'ConfigMap'", "has(manifest.metadata)", "has(manifest.metadata.labels)", "has(manifest.metadata.annotations)",
		"has(manifest.metadata.name)", "has(manifest.spec)", "manifest.metadata.labels == {}", "size(manifest.metadata.annotations) == 0",
		"manifest.metadata.annotations[?'a'].orValue('') == 'b'", "manifest.metadata.?labels.?x.orValue('') == ''",
		"size(manifest) == 3", "size(manifest.metadata) == 3", "manifest == manifest", "manifest.metadata == manifest.metadata",
		"'metadata' in manifest", "'labels' in manifest.metadata",
		"manifest.all(k, k != '')", "manifest.metadata.all(k, k != '')", "type(manifest) == map", "type(manifest.metadata) == map",
		"dyn(manifest)[1] == 1", "manifest.metadata[1] == 1", "1 in manifest", "manifest.metadata.name == 'cm'", "manifest.data.k == 'v'",
		"manifest.metadata.labels.x == 'y'", "manifest.metadata.annotations == manifest.metadata.labels", "manifest.status == null",
		"has(manifest.status)", "manifest.metadata.finalizers[0] == 'f'", "manifest['kind'] == 'ConfigMap'",
	}
	manifests := map[string]map[string]any{
		"plain":       manifest,
		"labelled":    {"kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "labels": map[string]any{"x": "y"}, "annotations": map[string]any{"a": "b"}}},
		"null maps":   {"kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "labels": nil, "annotations": "x"}, "status": nil},
		"no metadata": {"kind": "ConfigMap", "data": map[string]any{"k": "v"}},
		"string md":   {"kind": "ConfigMap", "metadata": "cm"},
		"finalizers":  {"metadata": map[string]any{"finalizers": []any{"f"}, "labels": map[string]any{}}},
		"empty":       {},
	}
	for mname, m := range manifests {
		for _, src := range manifestExprs {
			t.Run("manifest/"+mname+"/"+src, func(t *testing.T) {
				p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
					s.Orphaning = []v1alpha1.OrphaningRule{{Name: "r", When: src}}
				})
				a := p.Bind(ctx, cel.NewBudget(cel.ReconcileCostBudget), c).With(cel.VarWork, work).With(cel.VarManifest, m)
				check(t, p.Orphaning[0], src, a)
			})
		}
	}
}

func sameVal(a, b ref.Val) bool {
	return a.Equal(b) == types.True || fmt.Sprint(a.Value()) == fmt.Sprint(b.Value())
}
