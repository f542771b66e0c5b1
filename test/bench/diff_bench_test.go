package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/review"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// BenchmarkDiffFleet1000 runs `kubectl cleanup diff --snapshot` on a hub of
// 1,000 ManagedClusters (half prod, half staging), each with its namespace,
// three ManifestWorks, an add-on and two ConfigMaps: it reads the snapshot
// document and decides every cluster before and after a change that widens
// the prod policy to staging and changes its strategy. No API server.
func BenchmarkDiffFleet1000(b *testing.B) {
	raw, err := json.Marshal(fleetHub(b, 1000))
	if err != nil {
		b.Fatal(err)
	}
	widened := benchPolicy("prod", "['prod', 'staging']", "BestEffort")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h := &review.Hub{}
		if err := json.Unmarshal(raw, h); err != nil {
			b.Fatal(err)
		}
		r, err := review.Diff(context.Background(), h, []*unstructured.Unstructured{widened}, false)
		if err != nil {
			b.Fatal(err)
		}
		if len(r.Clusters) != 1000 || r.Unchanged != 0 {
			b.Fatalf("%d clusters change, %d unchanged: every cluster should change", len(r.Clusters), r.Unchanged)
		}
	}
	b.ReportMetric(float64(len(raw))/1e6, "snapshot-MB")
}

func benchPolicy(name, envs, strategy string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	err := yaml.Unmarshal(fmt.Appendf(nil, `apiVersion: cleanup.fleetops.dev/v1alpha1
kind: CleanupPolicy
metadata: {name: %s, uid: %s-uid, generation: 1}
spec:
  clusterSelector: "cluster.metadata.labels[?'env'].orValue('') in %s"
  removeStrategy: {default: %s}
  monitoredResources:
  - {version: v1, resource: configmaps, when: "object.metadata.labels[?'hold'].orValue('') == 'true'"}
  orphaning:
  - {name: keep-crds, when: "manifest.kind == 'CustomResourceDefinition'"}
`, name, name, envs, strategy), &u.Object)
	if err != nil {
		panic(err)
	}
	return u
}

// fleetHub is the snapshot of a fleet of n clusters.
func fleetHub(b *testing.B, n int) *review.Hub {
	h := &review.Hub{APIVersion: review.HubAPIVersion, Kind: review.HubKind,
		Listed: []string{"managedclusters.cluster.open-cluster-management.io", "cleanuppolicies.cleanup.fleetops.dev", "namespaces",
			"manifestworks.work.open-cluster-management.io", "configurationpolicies.policy.open-cluster-management.io",
			"policies.policy.open-cluster-management.io", "customresourcedefinitions.apiextensions.k8s.io",
			"managedclusteraddons.addon.open-cluster-management.io", "configmaps"}}
	for _, r := range []review.Resource{
		{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedCluster", Resource: "managedclusters"},
		{Group: "cleanup.fleetops.dev", Version: "v1alpha1", Kind: "CleanupPolicy", Resource: "cleanuppolicies"},
		{Version: "v1", Kind: "Namespace", Resource: "namespaces"},
		{Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespaced: true},
		{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWork", Resource: "manifestworks", Namespaced: true},
		{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Kind: "ManagedClusterAddOn", Resource: "managedclusteraddons", Namespaced: true},
		{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "ConfigurationPolicy", Resource: "configurationpolicies", Namespaced: true},
		{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "Policy", Resource: "policies", Namespaced: true},
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Resource: "customresourcedefinitions"},
	} {
		h.Resources = append(h.Resources, r)
	}
	add := func(obj runtime.Object) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			b.Fatal(err)
		}
		h.Objects = append(h.Objects, m)
	}
	crds, err := testenv.CRDsNamed(cel.ManagedClusterCRD, cel.ManifestWorkCRD, cel.ConfigurationPolicyCRD)
	if err != nil {
		b.Fatal(err)
	}
	own := &apiextensionsv1.CustomResourceDefinition{}
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "cleanup.fleetops.dev_cleanuppolicies.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, own); err != nil {
		b.Fatal(err)
	}
	for _, crd := range append(crds, own) {
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		add(crd)
	}
	h.Objects = append(h.Objects, benchPolicy("prod", "['prod']", "Required").Object, benchPolicy("staging", "['none']", "Required").Object)
	for i := range n {
		name := fmt.Sprintf("cluster-%04d", i)
		env := []string{"prod", "staging"}[i%2]
		mc := map[string]any{"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
			"metadata": map[string]any{"name": name, "uid": name + "-uid", "resourceVersion": "1", "labels": map[string]any{"env": env}},
			"spec":     map[string]any{"hubAcceptsClient": true}}
		h.Objects = append(h.Objects, mc)
		add(&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: name}})
		for j := range 3 {
			w := &workv1.ManifestWork{TypeMeta: metav1.TypeMeta{APIVersion: "work.open-cluster-management.io/v1", Kind: "ManifestWork"},
				ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: fmt.Sprintf("app-%d", j), Generation: 1}}
			for _, m := range []string{
				fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app-%d","namespace":"default"}}`, j),
				fmt.Sprintf(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"app%ds.example.com"}}`, j),
			} {
				w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(m)}})
			}
			w.UID = types.UID("work-" + w.Namespace + "-" + w.Name)
			add(w)
		}
		h.Objects = append(h.Objects, map[string]any{"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
			"metadata": map[string]any{"namespace": name, "name": "addon"}})
		for _, cm := range []string{"hold", "config"} {
			add(&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: cm, Labels: map[string]string{cm: "true"}}})
		}
	}
	return h
}
