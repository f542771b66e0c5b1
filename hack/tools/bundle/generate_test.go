package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// generated assembles the bundle from config/manifests and returns its CSV
// and CRDs, typed.
func generated(t *testing.T) (*v1alpha1.ClusterServiceVersion, []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	b, err := assemble(testOptions(t), built(t))
	if err != nil {
		t.Fatal(err)
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range b.Files {
		switch {
		case strings.HasSuffix(f.Path, ".clusterserviceversion.yaml"):
			if err := yaml.UnmarshalStrict(f.Data, csv); err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
		case strings.Contains(f.Path, "/manifests/") && strings.Count(f.Path[strings.LastIndex(f.Path, "/"):], "_") == 1:
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal(f.Data, crd); err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
			crds = append(crds, crd)
		}
	}
	if len(crds) == 0 {
		t.Fatal("no CRD in the bundle")
	}
	return csv, crds
}

// edited is the build of config/manifests with one object changed or added.
func edited(t *testing.T, edit func(objs []*unstructured.Unstructured) []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	return edit(built(t))
}

func find(objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind {
			return u
		}
	}
	return nil
}

func TestGenerateIsDeterministic(t *testing.T) {
	o := testOptions(t)
	first, err := assemble(o, built(t))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := assemble(o, built(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Files) != len(first.Files) {
			t.Fatalf("%d files, then %d", len(first.Files), len(again.Files))
		}
		for i := range first.Files {
			if first.Files[i].Path != again.Files[i].Path || !bytes.Equal(first.Files[i].Data, again.Files[i].Data) {
				t.Fatalf("%s renders differently from run to run", first.Files[i].Path)
			}
		}
	}
}

// The cert-manager certificate volume goes: OLM mounts its own where
// controller-runtime looks by default.
func TestCertificateVolumesAreRemoved(t *testing.T) {
	objs := built(t)
	if find(objs, "Certificate") == nil {
		t.Skip("config/manifests builds no cert-manager Certificate")
	}
	csv, _ := generated(t)
	for _, d := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil && strings.Contains(v.Secret.SecretName, "webhook-server-cert") {
				t.Errorf("%s keeps volume %s of the cert-manager secret", d.Name, v.Name)
			}
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, m := range c.VolumeMounts {
				if m.MountPath == "/tmp/k8s-webhook-server/serving-certs" {
					t.Errorf("%s: container %s mounts %s over OLM's certificate", d.Name, c.Name, m.MountPath)
				}
			}
		}
	}
}

func TestWebhookDefinitions(t *testing.T) {
	csv, _ := generated(t)
	defs := csv.Spec.WebhookDefinitions
	if len(defs) == 0 {
		t.Fatal("no webhookdefinitions")
	}
	deployments := map[string]bool{}
	for _, d := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		deployments[d.Name] = true
	}
	for _, d := range defs {
		if !deployments[d.DeploymentName] {
			t.Errorf("%s: deployment %q is not in the CSV", d.GenerateName, d.DeploymentName)
		}
		if d.ContainerPort != 443 || d.TargetPort == nil || d.TargetPort.IntValue() != 9443 {
			t.Errorf("%s: service port %d to container port %v, want 443 to 9443", d.GenerateName, d.ContainerPort, d.TargetPort)
		}
		if d.WebhookPath == nil || !strings.HasPrefix(*d.WebhookPath, "/validate-") {
			t.Errorf("%s: webhookPath %v", d.GenerateName, d.WebhookPath)
		}
	}
}

func TestImageOption(t *testing.T) {
	o := testOptions(t)
	o.Image = "registry.example/cleanup-operator:dev"
	b, err := assemble(o, built(t))
	if err != nil {
		t.Fatal(err)
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	for _, f := range b.Files {
		if strings.HasSuffix(f.Path, ".clusterserviceversion.yaml") {
			if err := yaml.Unmarshal(f.Data, csv); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := csv.Annotations["containerImage"]; got != o.Image {
		t.Errorf("containerImage %q, want %q", got, o.Image)
	}
	c := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.Containers
	if !slices.ContainsFunc(c, func(c corev1.Container) bool { return c.Image == o.Image }) {
		t.Errorf("no container runs %s", o.Image)
	}
}

func TestGeneratorRefuses(t *testing.T) {
	cases := []struct {
		name string
		edit func(objs []*unstructured.Unstructured) []*unstructured.Unstructured
		want string
	}{{
		name: "a descriptor of a field the schema lacks",
		edit: func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
			base := find(objs, "ClusterServiceVersion")
			owned, _, _ := unstructured.NestedSlice(base.Object, "spec", "customresourcedefinitions", "owned")
			d := owned[0].(map[string]any)
			d["specDescriptors"] = append(d["specDescriptors"].([]any), map[string]any{"path": "removeStrategy.tiemout", "displayName": "x"})
			_ = unstructured.SetNestedSlice(base.Object, owned, "spec", "customresourcedefinitions", "owned")
			return objs
		},
		want: "no field spec.removeStrategy.tiemout",
	}, {
		name: "a misspelt field of the base CSV",
		edit: func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
			_ = unstructured.SetNestedField(find(objs, "ClusterServiceVersion").Object, "1.30.0", "spec", "minKubeVersoin")
			return objs
		},
		want: "minKubeVersoin",
	}, {
		name: "an unknown install mode",
		edit: func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
			_ = unstructured.SetNestedSlice(find(objs, "ClusterServiceVersion").Object,
				[]any{map[string]any{"type": "EveryNamespace", "supported": true}}, "spec", "installModes")
			return objs
		},
		want: "EveryNamespace",
	}, {
		name: "a CRD the base CSV does not describe",
		edit: func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
			_ = unstructured.SetNestedSlice(find(objs, "ClusterServiceVersion").Object, nil, "spec", "customresourcedefinitions", "owned")
			return objs
		},
		want: "describe CRD cleanuppolicies.cleanup.fleetops.dev",
	}, {
		name: "a kind a bundle cannot carry",
		edit: func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
			job := &unstructured.Unstructured{}
			job.SetAPIVersion("batch/v1")
			job.SetKind("Job")
			job.SetName("migrate")
			return append(objs, job)
		},
		want: "cannot carry kind batch/Job",
	}, {
		name: "a webhook with a namespaceSelector",
		edit: func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
			vwc := find(objs, "ValidatingWebhookConfiguration")
			hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
			hooks[0].(map[string]any)["namespaceSelector"] = map[string]any{"matchLabels": map[string]any{"a": "b"}}
			_ = unstructured.SetNestedSlice(vwc.Object, hooks, "webhooks")
			return objs
		},
		want: "namespaceSelector",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := assemble(testOptions(t), edited(t, c.edit))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

// ValidatingAdmissionPolicies cannot go in a bundle: the operator creates
// them, so the generator leaves them out and says why.
func TestAdmissionPoliciesAreLeftOut(t *testing.T) {
	objs := built(t)
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("admissionregistration.k8s.io/v1")
		u.SetKind(kind)
		u.SetName("cleanup-operator-deleting-cluster")
		objs = append(objs, u)
	}
	b, err := assemble(testOptions(t), objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ValidatingAdmissionPolicy ", "ValidatingAdmissionPolicyBinding "} {
		if !slices.ContainsFunc(b.LeftOut, func(n Note) bool {
			return strings.HasPrefix(n.Object, kind) && strings.Contains(n.Reason, "internal/admissionpolicy")
		}) {
			t.Errorf("%s is not left out with its reason: %v", kind, b.LeftOut)
		}
	}
	for _, f := range b.Files {
		if strings.Contains(strings.ToLower(f.Path), "validatingadmissionpolic") {
			t.Errorf("%s is in the bundle", f.Path)
		}
	}
}

// config/default installs the operator's FlowSchema and priority level; a
// bundle cannot carry them, so the generator leaves them out and says the
// operator creates them.
func TestFlowControlIsLeftOut(t *testing.T) {
	b, err := assemble(testOptions(t), built(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"FlowSchema ", "PriorityLevelConfiguration "} {
		if !slices.ContainsFunc(b.LeftOut, func(n Note) bool {
			return n.Object == kind+"cleanup-operator-manager" && strings.Contains(n.Reason, "internal/flowcontrol")
		}) {
			t.Errorf("%s is not left out with its reason: %v", kind, b.LeftOut)
		}
	}
	for _, f := range b.Files {
		if strings.Contains(f.Path, "flowcontrol.apiserver.k8s.io") {
			t.Errorf("%s is in the bundle", f.Path)
		}
	}
}

// The operator creates its FlowSchema and priority level at start, so the
// CSV's cluster permissions must let it.
func TestClusterPermissionsAllowFlowControl(t *testing.T) {
	csv, _ := generated(t)
	for _, resource := range []string{"flowschemas", "prioritylevelconfigurations"} {
		for _, verb := range []string{"get", "create"} {
			if !allowed(csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions, "flowcontrol.apiserver.k8s.io", resource, verb) {
				t.Errorf("the CSV's clusterPermissions do not allow %s %s", verb, resource)
			}
		}
	}
}

// The operator creates its ValidatingAdmissionPolicies at start, so the
// CSV's cluster permissions must let it.
func TestClusterPermissionsAllowAdmissionPolicies(t *testing.T) {
	csv, _ := generated(t)
	for _, resource := range []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"} {
		for _, verb := range []string{"get", "create"} {
			if !allowed(csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions, "admissionregistration.k8s.io", resource, verb) {
				t.Errorf("the CSV's clusterPermissions do not allow %s %s", verb, resource)
			}
		}
	}
}

func allowed(perms []v1alpha1.StrategyDeploymentPermissions, group, resource, verb string) bool {
	for _, p := range perms {
		for _, r := range p.Rules {
			if (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
				(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
				(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
				return true
			}
		}
	}
	return false
}

func TestSchemaAt(t *testing.T) {
	leaf := apiextensionsv1.JSONSchemaProps{Type: "string"}
	s := &apiextensionsv1.JSONSchemaProps{Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"rules": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
				Properties: map[string]apiextensionsv1.JSONSchemaProps{"when": leaf},
			}}},
			"name":  leaf,
			"extra": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
		}},
	}}
	for path, ok := range map[string]bool{
		"spec.name":           true,
		"spec.rules":          true,
		"spec.rules[0].when":  true,
		"spec.extra.anything": true,
		"spec.rules.when":     false,
		"spec.name[0]":        false,
		"spec.nmae":           false,
		"spec..name":          false,
	} {
		if _, err := schemaAt(s, path); (err == nil) != ok {
			t.Errorf("schemaAt(%q): error %v, want ok=%v", path, err, ok)
		}
	}
}

// A role bound to the manager and to someone else stays in the bundle as a
// manifest, so that the other binding does not dangle.
func TestRoleBoundElsewhereStays(t *testing.T) {
	objs := built(t)
	var role string
	for _, u := range objs {
		if u.GetKind() == "ClusterRoleBinding" {
			role, _, _ = unstructured.NestedString(u.Object, "roleRef", "name")
			break
		}
	}
	if role == "" {
		t.Skip("config/manifests builds no ClusterRoleBinding")
	}
	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "ClusterRoleBinding",
		"metadata":   map[string]any{"name": "someone-else"},
		"roleRef":    map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
		"subjects":   []any{map[string]any{"kind": "Group", "name": "auditors", "apiGroup": "rbac.authorization.k8s.io"}},
	}}
	b, err := assemble(testOptions(t), append(objs, other))
	if err != nil {
		t.Fatal(err)
	}
	var haveRole, haveBinding bool
	for _, f := range b.Files {
		haveRole = haveRole || strings.HasSuffix(f.Path, "/"+role+"_rbac.authorization.k8s.io_v1_clusterrole.yaml")
		haveBinding = haveBinding || strings.HasSuffix(f.Path, "/someone-else_rbac.authorization.k8s.io_v1_clusterrolebinding.yaml")
	}
	if !haveRole || !haveBinding {
		t.Errorf("ClusterRole %s in the bundle: %v; the other binding: %v", role, haveRole, haveBinding)
	}
}
