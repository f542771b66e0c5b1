package review

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// policyCRD is the CleanupPolicy CRD this version installs.
func policyCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "cleanup.fleetops.dev_cleanuppolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return crd
}

// policyFile writes a CleanupPolicy named fleet of the spec's lines and
// reads it back as diff reads -f.
func policyFile(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	write(t, path, "apiVersion: cleanup.fleetops.dev/v1alpha1\nkind: CleanupPolicy\nmetadata: {name: fleet}\nspec:\n"+spec+"\n")
	policies, _, err := Read([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != 1 {
		t.Fatalf("%d policies read, want 1", len(policies))
	}
	return policies[0]
}

// served is the policy of the file as the API server holds it once
// applied, and as a client reads it: the CRD's defaults given, the JSON
// decoded as the client decodes it (integers as int64).
func served(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, file *unstructured.Unstructured) map[string]any {
	t.Helper()
	u := file.DeepCopy()
	s, err := structuralOf(crd, "v1alpha1")
	if err != nil || s == nil {
		t.Fatalf("the CRD's schema: %v", err)
	}
	defaulting.Default(u.Object, s)
	u.SetUID("fleet-uid")
	u.SetGeneration(1)
	u.SetResourceVersion("7")
	raw, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := unstructured.UnstructuredJSONScheme.Decode(raw, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*unstructured.Unstructured).Object
}

// numericHub is a hub of one cluster and the live policy, with the
// CleanupPolicy CRD when crd is not nil.
func numericHub(crd *apiextensionsv1.CustomResourceDefinition, live map[string]any) (*Hub, error) {
	h := &Hub{APIVersion: HubAPIVersion, Kind: HubKind,
		Listed: []string{"managedclusters.cluster.open-cluster-management.io", "cleanuppolicies.cleanup.fleetops.dev", "namespaces",
			"manifestworks.work.open-cluster-management.io", "configurationpolicies.policy.open-cluster-management.io",
			"policies.policy.open-cluster-management.io", "customresourcedefinitions.apiextensions.k8s.io",
			"managedclusteraddons.addon.open-cluster-management.io"},
		Resources: []Resource{
			{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedCluster", Resource: "managedclusters"},
			{Group: "cleanup.fleetops.dev", Version: "v1alpha1", Kind: "CleanupPolicy", Resource: "cleanuppolicies"},
			{Version: "v1", Kind: "Namespace", Resource: "namespaces"},
			{Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespaced: true},
			{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWork", Resource: "manifestworks", Namespaced: true},
			{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Kind: "ManagedClusterAddOn", Resource: "managedclusteraddons", Namespaced: true},
			{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "ConfigurationPolicy", Resource: "configurationpolicies", Namespaced: true},
			{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "Policy", Resource: "policies", Namespaced: true},
			{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Resource: "customresourcedefinitions"},
		},
		// As the hub is read: without the data of any Secret in it.
		Objects: []map[string]any{sanitize(&unstructured.Unstructured{Object: live}).Object,
			{"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
				"metadata": map[string]any{"name": "c1", "uid": "c1-uid", "resourceVersion": "1"}, "spec": map[string]any{"hubAcceptsClient": true}},
			{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "c1", "uid": "ns-c1-uid"}},
		}}
	if crd != nil {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			return nil, err
		}
		h.Objects = append(h.Objects, obj)
	}
	return h, nil
}

// throughSnapshot is the hub as diff --snapshot reads it from the file
// kubectl cleanup snapshot wrote: its numbers decoded as float64.
func throughSnapshot(h *Hub) (*Hub, error) {
	raw, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	out := &Hub{}
	if err := yaml.Unmarshal(raw, out); err != nil {
		return nil, err
	}
	return out, out.Check()
}

// TestDiffComparesSpecsAsServed: a file identical to the one applied is
// unchanged, whatever numbers it holds (read from a file as float64, from
// the API server as int64, from a snapshot as float64) and whatever
// defaults the API server gave; a change of any of them is a change. Each
// through the live hub and through a snapshot, with the hub's CRD and
// without it.
func TestDiffComparesSpecsAsServed(t *testing.T) {
	const required = "  removeStrategy: {default: Required}\n"
	for _, tc := range []struct {
		name              string
		applied, proposed string
		changed           bool
	}{
		{name: "the same priority", applied: "  priority: 5\n" + required, proposed: "  priority: 5\n" + required},
		{name: "a priority raised", applied: "  priority: 1\n" + required, proposed: "  priority: 2\n" + required, changed: true},
		{name: "a negative priority", applied: "  priority: -3\n" + required, proposed: "  priority: -3\n" + required},
		{name: "the same count of teardowns", applied: required + "  blastRadius: {maxTeardowns: 2}", proposed: required + "  blastRadius: {maxTeardowns: 2}"},
		{name: "a count of teardowns raised", applied: required + "  blastRadius: {maxTeardowns: 2}", proposed: required + "  blastRadius: {maxTeardowns: 3}", changed: true},
		{name: "no teardown at all", applied: required + "  blastRadius: {maxTeardowns: 0}", proposed: required + "  blastRadius: {maxTeardowns: 0}"},
		{name: "a count of 0 set", applied: required, proposed: required + "  blastRadius: {maxTeardowns: 0}", changed: true},
		{name: "the same share of teardowns", applied: required + "  blastRadius: {maxTeardowns: '10%'}", proposed: required + "  blastRadius: {maxTeardowns: '10%'}"},
		{name: "a share of teardowns raised", applied: required + "  blastRadius: {maxTeardowns: '10%'}", proposed: required + "  blastRadius: {maxTeardowns: '20%'}", changed: true},
		{name: "a count for a share", applied: required + "  blastRadius: {maxTeardowns: '10%'}", proposed: required + "  blastRadius: {maxTeardowns: 10}", changed: true},
		{name: "the same concurrency", applied: required + "  blastRadius: {maxConcurrent: 2}", proposed: required + "  blastRadius: {maxConcurrent: 2}"},
		{name: "a concurrency raised", applied: required + "  blastRadius: {maxConcurrent: 2}", proposed: required + "  blastRadius: {maxConcurrent: 3}", changed: true},
		{name: "the same window", applied: required + "  blastRadius: {maxTeardowns: 2, window: 1h}", proposed: required + "  blastRadius: {maxTeardowns: 2, window: 1h}"},
		{name: "a window lengthened", applied: required + "  blastRadius: {maxTeardowns: 2, window: 1h}", proposed: required + "  blastRadius: {maxTeardowns: 2, window: 2h}", changed: true},
		{name: "the window written otherwise", applied: required + "  blastRadius: {maxTeardowns: 2, window: 1h}", proposed: required + "  blastRadius: {maxTeardowns: 2, window: 60m}"},
		{name: "the same timeout", applied: "  removeStrategy: {default: Required, timeout: 45m}", proposed: "  removeStrategy: {default: Required, timeout: 45m}"},
		{name: "a timeout lengthened", applied: "  removeStrategy: {default: Required, timeout: 45m}", proposed: "  removeStrategy: {default: Required, timeout: 1h}", changed: true},
		{name: "the default timeout left out", applied: required, proposed: required},
		{name: "the default timeout written", applied: required, proposed: "  removeStrategy: {default: Required, timeout: 30m}"},
		{name: "a timeout set", applied: required, proposed: "  removeStrategy: {default: Required, timeout: 1h}", changed: true},
		{name: "a timeout left out", applied: "  removeStrategy: {default: Required, timeout: 1h}", proposed: required, changed: true},
		{name: "the defaults of the signal and of prune", applied: required + "  deletionSignal: {manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: s, namespace: default}}]}\n  prune: {}",
			proposed: required + "  deletionSignal: {manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: s, namespace: default}}]}\n  prune: {}"},
		{name: "a field the API server drops", applied: required, proposed: required + "  Priority: 5"},
		{name: "a Secret among the signal manifests, whose data the hub is read without",
			applied:  required + "  deletionSignal: {manifests: [{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: default}, stringData: {token: a}}]}",
			proposed: required + "  deletionSignal: {manifests: [{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: default}, stringData: {token: a}}]}"},
		{name: "a Secret signal manifest renamed", applied: required + "  deletionSignal: {manifests: [{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: default}, stringData: {token: a}}]}",
			proposed: required + "  deletionSignal: {manifests: [{apiVersion: v1, kind: Secret, metadata: {name: t, namespace: default}, stringData: {token: a}}]}", changed: true},
		{name: "every number at once", applied: "  priority: 7\n  removeStrategy: {default: Required, timeout: 2h}\n  blastRadius: {maxTeardowns: 2, window: 1h, maxConcurrent: 1}",
			proposed: "  priority: 7\n  removeStrategy: {default: Required, timeout: 2h}\n  blastRadius: {maxTeardowns: 2, window: 1h, maxConcurrent: 1}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crd := policyCRD(t)
			live := served(t, crd, policyFile(t, tc.applied))
			proposed := policyFile(t, tc.proposed)
			want := "unchanged"
			if tc.changed {
				want = "changed"
			}
			for _, hubCRD := range []*apiextensionsv1.CustomResourceDefinition{crd, nil} {
				h, err := numericHub(hubCRD, runtime.DeepCopyJSON(live))
				if err != nil {
					t.Fatal(err)
				}
				offline, err := throughSnapshot(h)
				if err != nil {
					t.Fatal(err)
				}
				for path, hub := range map[string]*Hub{"live": h, "snapshot": offline} {
					if hubCRD == nil {
						path += " without the CRD"
					}
					r, err := Diff(context.Background(), hub, []*unstructured.Unstructured{proposed.DeepCopy()}, false)
					if err != nil {
						t.Fatalf("%s: %v", path, err)
					}
					if len(r.Policies) != 1 || r.Policies[0] != (PolicyChange{Name: "fleet", Change: want}) {
						t.Errorf("%s: policies %+v, want fleet %s", path, r.Policies, want)
					}
					if r.Differs() != tc.changed {
						t.Errorf("%s: differs %v, want %v", path, r.Differs(), tc.changed)
					}
				}
			}
		})
	}
}

// TestSameSpecUndecodable: a spec the typed API cannot hold (a timeout
// stored before the schema refused a word) is the same only as the same
// JSON, its integers alike whatever their Go type.
func TestSameSpecUndecodable(t *testing.T) {
	stored := map[string]any{"priority": int64(2), "removeStrategy": map[string]any{"default": "Required", "timeout": "soon"}}
	for _, tc := range []struct {
		proposed map[string]any
		same     bool
	}{
		{map[string]any{"priority": float64(2), "removeStrategy": map[string]any{"default": "Required", "timeout": "soon"}}, true},
		{map[string]any{"priority": float64(3), "removeStrategy": map[string]any{"default": "Required", "timeout": "soon"}}, false},
		{map[string]any{"priority": float64(2), "removeStrategy": map[string]any{"default": "Required", "timeout": "30m"}}, false},
	} {
		if got := sameSpec(stored, tc.proposed); got != tc.same {
			t.Errorf("sameSpec(%v, %v) = %v, want %v", stored, tc.proposed, got, tc.same)
		}
	}
}

// TestDefaultsAreTheCRDs: the defaults specs are compared with are those
// of the CleanupPolicy CRD, every one of them.
func TestDefaultsAreTheCRDs(t *testing.T) {
	crd := policyCRD(t)
	var defaulted []string
	var walk func(path string, p apiextensionsv1.JSONSchemaProps)
	walk = func(path string, p apiextensionsv1.JSONSchemaProps) {
		if p.Default != nil {
			defaulted = append(defaulted, path)
		}
		for name, child := range p.Properties {
			walk(path+"."+name, child)
		}
		if p.Items != nil && p.Items.Schema != nil {
			walk(path+"[]", *p.Items.Schema)
		}
	}
	var s *structuralschema.Structural
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1alpha1" {
			walk("", v.Schema.OpenAPIV3Schema.Properties["spec"])
			var err error
			if s, err = structuralOf(crd, v.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.Sort(defaulted)
	if want := []string{".deletionSignal.workName", ".prune.default", ".removeStrategy.timeout"}; !slices.Equal(defaulted, want) {
		t.Fatalf("the CRD defaults spec%s; withDefaults fills in spec%s: make them the same", strings.Join(defaulted, ", spec"), strings.Join(want, ", spec"))
	}
	// Every defaulted field left out, its parent there.
	obj := map[string]any{"apiVersion": "cleanup.fleetops.dev/v1alpha1", "kind": "CleanupPolicy", "metadata": map[string]any{"name": "p"},
		"spec": map[string]any{"removeStrategy": map[string]any{"default": "Required"}, "deletionSignal": map[string]any{}, "prune": map[string]any{}}}
	byServer := runtime.DeepCopyJSON(obj)
	defaulting.Default(byServer, s)
	server, err := typedSpec(byServer["spec"])
	if err != nil {
		t.Fatal(err)
	}
	ours, err := typedSpec(obj["spec"])
	if err != nil {
		t.Fatal(err)
	}
	if got := withDefaults(ours); !equality.Semantic.DeepEqual(got, server) {
		t.Errorf("withDefaults gives %+v, the CRD %+v", got, server)
	}
}
