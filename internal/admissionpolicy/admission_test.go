package admissionpolicy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// The tests run against a real kube-apiserver and etcd with the OCM CRDs
// installed, started once for the package.
var k8s client.WithWatch

// testEnv is the running environment, for tests that add users.
var testEnv *testenv.Env

// enforcementTimeout bounds the wait for the API server to enforce a policy
// it has just been given: it compiles policies from its informer.
const enforcementTimeout = 30 * time.Second

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	logf.SetLogger(logr.Discard())
	env, err := testenv.Start()
	testEnv = env
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testEnv = env
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the test API server:", err)
		}
	}()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	k8s, err = client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func testContext(t *testing.T) context.Context {
	return logf.IntoContext(t.Context(), testr.New(t))
}

// TestEnsure: Ensure creates the four objects, a second call changes
// nothing, an administrator's edit stays, and a deleted object comes back.
func TestEnsure(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)

	// Start from nothing, whichever tests ran before.
	for _, obj := range admissionpolicy.Objects() {
		g.Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj))).To(Succeed())
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Satisfy(apierrors.IsNotFound), "%s was not deleted", obj.GetName())
	}

	g.Expect(admissionpolicy.Ensure(ctx, k8s)).To(Succeed())
	created := resourceVersions(ctx, g)
	g.Expect(created).To(HaveLen(len(admissionpolicy.Objects())))
	g.Expect(created).To(HaveKey(admissionpolicy.DeletingClusterPolicy))
	g.Expect(created).To(HaveKey(admissionpolicy.BindingName(admissionpolicy.DeletingClusterPolicy)))
	g.Expect(created).To(HaveKey(admissionpolicy.DeletingWorkPolicy))
	g.Expect(created).To(HaveKey(admissionpolicy.BindingName(admissionpolicy.DeletingWorkPolicy)))
	for _, obj := range admissionpolicy.Objects() {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		var managers []string
		for _, f := range obj.GetManagedFields() {
			managers = append(managers, f.Manager)
		}
		g.Expect(managers).To(ConsistOf(v1alpha1.FieldManager), "field managers of %s", obj.GetName())
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: admissionpolicy.BindingName(admissionpolicy.DeletingWorkPolicy)}, binding)).To(Succeed())
	g.Expect(binding.Spec.PolicyName).To(Equal(admissionpolicy.DeletingWorkPolicy))
	g.Expect(binding.Spec.ValidationActions).To(Equal([]admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}))

	// A second call is a no-op.
	g.Expect(admissionpolicy.Ensure(ctx, k8s)).To(Succeed())
	g.Expect(resourceVersions(ctx, g)).To(Equal(created))

	// An administrator's edit stays.
	edited := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: admissionpolicy.DeletingWorkPolicy}, edited)).To(Succeed())
	original := edited.Spec.Validations[0].Message
	edited.Spec.Validations[0].Message = "edited by an administrator"
	g.Expect(k8s.Update(ctx, edited)).To(Succeed())
	t.Cleanup(func() {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: admissionpolicy.DeletingWorkPolicy}, p); err != nil {
			t.Errorf("restoring policy %s: %v", admissionpolicy.DeletingWorkPolicy, err)
			return
		}
		p.Spec.Validations[0].Message = original
		if err := k8s.Update(context.Background(), p); err != nil {
			t.Errorf("restoring policy %s: %v", admissionpolicy.DeletingWorkPolicy, err)
		}
	})
	afterEdit := resourceVersions(ctx, g)
	g.Expect(admissionpolicy.Ensure(ctx, k8s)).To(Succeed())
	g.Expect(resourceVersions(ctx, g)).To(Equal(afterEdit))
	got := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: admissionpolicy.DeletingWorkPolicy}, got)).To(Succeed())
	g.Expect(got.Spec.Validations[0].Message).To(Equal("edited by an administrator"))

	// A deleted object comes back; the others are left alone.
	gone := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	gone.Name = admissionpolicy.BindingName(admissionpolicy.DeletingClusterPolicy)
	g.Expect(k8s.Delete(ctx, gone)).To(Succeed())
	g.Expect(admissionpolicy.Ensure(ctx, k8s)).To(Succeed())
	after := resourceVersions(ctx, g)
	g.Expect(after).To(HaveKey(gone.Name))
	g.Expect(after[gone.Name]).NotTo(Equal(afterEdit[gone.Name]))
	delete(after, gone.Name)
	delete(afterEdit, gone.Name)
	g.Expect(after).To(Equal(afterEdit))
}

// TestEnsureErrors: a create that finds the object already there is fine,
// and a failure names the object.
func TestEnsureErrors(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	g.Expect(admissionpolicy.Ensure(ctx, k8s)).To(Succeed())

	// Another replica created the objects between Get and Create.
	raced := interceptor.NewClient(k8s, interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
			return apierrors.NewNotFound(schema.GroupResource{Group: "admissionregistration.k8s.io"}, key.Name)
		},
	})
	g.Expect(admissionpolicy.Ensure(ctx, raced)).To(Succeed())

	forbidden := interceptor.NewClient(k8s, interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Group: "admissionregistration.k8s.io"}, key.Name, errors.New("no RBAC"))
		},
	})
	g.Expect(admissionpolicy.Ensure(ctx, forbidden)).To(MatchError(And(
		ContainSubstring("ValidatingAdmissionPolicy "+admissionpolicy.DeletingClusterPolicy+":"),
		ContainSubstring("no RBAC"))))

	failing := interceptor.NewClient(k8s, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Name == admissionpolicy.BindingName(admissionpolicy.DeletingWorkPolicy) {
				return apierrors.NewNotFound(schema.GroupResource{Group: "admissionregistration.k8s.io"}, key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return errors.New("etcd is down")
		},
	})
	g.Expect(admissionpolicy.Ensure(ctx, failing)).To(MatchError(And(
		ContainSubstring("creating ValidatingAdmissionPolicyBinding "+admissionpolicy.BindingName(admissionpolicy.DeletingWorkPolicy)+":"),
		ContainSubstring("etcd is down"))))
}

// TestDeletingCluster: new ManifestWorks and ManagedClusterAddOns are
// refused in a labelled namespace and accepted elsewhere.
func TestDeletingCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	g.Expect(admissionpolicy.Ensure(ctx, k8s)).To(Succeed())

	deleting := newNamespace(ctx, t, map[string]string{v1alpha1.ClusterDeletingLabel: "true"})
	want := fmt.Sprintf("cluster %s is being deleted: new ManifestWorks and "+
		"ManagedClusterAddOns are refused in its namespace until its cleanup ends", deleting)

	g.Eventually(func() error {
		return k8s.Create(ctx, manifestWork(deleting, "probe", nil), client.DryRunAll)
	}).WithTimeout(enforcementTimeout).Should(MatchError(ContainSubstring(want)), "the policy is not enforced")

	err := k8s.Create(ctx, manifestWork(deleting, "work", nil))
	g.Expect(err).To(MatchError(ContainSubstring(want)))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)
	err = k8s.Create(ctx, addOn(deleting, "addon"))
	g.Expect(err).To(MatchError(ContainSubstring(want)))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)

	for _, labels := range []map[string]string{nil, {v1alpha1.ClusterDeletingLabel: "false"}} {
		open := newNamespace(ctx, t, labels)
		g.Expect(k8s.Create(ctx, manifestWork(open, "work", nil))).To(Succeed(), "namespace labels %v", labels)
		g.Expect(k8s.Create(ctx, addOn(open, "addon"))).To(Succeed(), "namespace labels %v", labels)
	}
}

// TestDeletingWork: a ManifestWork being deleted cannot change its
// spec.deleteOption; its finalizers can still be removed.
func TestDeletingWork(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	g.Expect(admissionpolicy.Ensure(ctx, k8s)).To(Succeed())
	ns := newNamespace(ctx, t, nil)
	const finalizer = "test.fleetops.dev/hold"

	cases := []struct {
		name    string
		initial map[string]any
		change  func(w *unstructured.Unstructured)
	}{{
		name:   "absent-to-orphan",
		change: setPropagation("Orphan"),
	}, {
		name:    "foreground-to-orphan",
		initial: map[string]any{"propagationPolicy": "Foreground"},
		change:  setPropagation("Orphan"),
	}, {
		name:    "foreground-to-absent",
		initial: map[string]any{"propagationPolicy": "Foreground"},
		change:  func(w *unstructured.Unstructured) { unstructured.RemoveNestedField(w.Object, "spec", "deleteOption") },
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			work := manifestWork(ns, tc.name, tc.initial)
			work.SetFinalizers([]string{finalizer})
			g.Expect(k8s.Create(ctx, work)).To(Succeed())
			g.Expect(k8s.Delete(ctx, work)).To(Succeed())
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(work), work)).To(Succeed())
			g.Expect(work.GetDeletionTimestamp()).NotTo(BeNil())
			before, _, _ := unstructured.NestedFieldCopy(work.Object, "spec", "deleteOption")
			want := fmt.Sprintf("ManifestWork %s is being deleted: its spec.deleteOption can no longer change", tc.name)

			changed := func() *unstructured.Unstructured {
				w := work.DeepCopy()
				tc.change(w)
				return w
			}
			g.Eventually(func() error {
				return k8s.Update(ctx, changed(), client.DryRunAll)
			}).WithTimeout(enforcementTimeout).Should(MatchError(ContainSubstring(want)), "the policy is not enforced")

			err := k8s.Update(ctx, changed())
			g.Expect(err).To(MatchError(ContainSubstring(want)))
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(work), work)).To(Succeed())
			after, _, _ := unstructured.NestedFieldCopy(work.Object, "spec", "deleteOption")
			if before == nil {
				g.Expect(after).To(BeNil(), "spec.deleteOption changed")
			} else {
				g.Expect(after).To(Equal(before), "spec.deleteOption changed")
			}

			// Other changes pass: a label, then the removal of the finalizer.
			work.SetLabels(map[string]string{"test.fleetops.dev/touched": "true"})
			g.Expect(k8s.Update(ctx, work)).To(Succeed())
			work.SetFinalizers(nil)
			g.Expect(k8s.Update(ctx, work)).To(Succeed())
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(work), work)).To(Satisfy(apierrors.IsNotFound))
		})
	}

	// A work that is not being deleted changes its deleteOption freely.
	live := manifestWork(ns, "live", nil)
	g.Expect(k8s.Create(ctx, live)).To(Succeed())
	setPropagation("Orphan")(live)
	g.Expect(k8s.Update(ctx, live)).To(Succeed())
}

// TestConfigMatchesObjects: config/admission holds exactly Objects() and
// ProtectionObjects() rendered for config/default's service account.
func TestConfigMatchesObjects(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(testenv.RepoRoot(), "config", "admission")

	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	g.Expect(yaml.Unmarshal(raw, &kustomization)).To(Succeed())
	g.Expect(kustomization.Resources).To(ConsistOf("deleting-cluster.yaml", "deleting-work.yaml", "deletion-protection.yaml", "delete-confirmation.yaml",
		"policy-authority.yaml", "signal-manifests.yaml", "blast-radius-release.yaml", "protection-mark.yaml", "protected-namespace.yaml", "teardown-condition.yaml",
		"governed-namespace.yaml", "ocm-cleanup-hold.yaml", "work-owner.yaml"))

	want := map[string]map[string]any{}
	var rendered []string
	for _, obj := range admissionpolicy.AllObjects(admissionpolicy.DefaultOperatorUser) {
		want[objectKey(obj)] = normalize(t, obj)
		out, err := yaml.Marshal(withoutStatus(normalize(t, obj)))
		g.Expect(err).NotTo(HaveOccurred())
		rendered = append(rendered, string(out))
	}
	hint := "config/admission must hold what internal/admissionpolicy renders:\n---\n" + strings.Join(rendered, "---\n")

	got := map[string]map[string]any{}
	for _, file := range kustomization.Resources {
		for i, doc := range documents(t, filepath.Join(dir, file)) {
			obj := decodeStrict(t, file, doc)
			if obj == nil {
				t.Errorf("%s, document %d: not a ValidatingAdmissionPolicy or binding", file, i+1)
				continue
			}
			key := objectKey(obj)
			if _, dup := got[key]; dup {
				t.Errorf("%s: %s appears twice", file, key)
			}
			got[key] = normalize(t, obj)
		}
	}

	var diffs []string
	for key, w := range want {
		g, ok := got[key]
		if !ok {
			diffs = append(diffs, key+": missing from config/admission")
			continue
		}
		for _, d := range diff("", w, g) {
			diffs = append(diffs, key+": "+d)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			diffs = append(diffs, key+": in config/admission but not in admissionpolicy.Objects()")
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		t.Errorf("config/admission drifted from admissionpolicy.Objects():\n  %s\n\n%s", strings.Join(diffs, "\n  "), hint)
	}
}

func resourceVersions(ctx context.Context, g *WithT) map[string]string {
	versions := map[string]string{}
	for _, obj := range admissionpolicy.Objects() {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed(), "getting %s", obj.GetName())
		versions[obj.GetName()] = obj.GetResourceVersion()
	}
	return versions
}

func newNamespace(ctx context.Context, t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "admission-", Labels: labels}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := k8s.Delete(context.Background(), ns); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

func manifestWork(namespace, name string, deleteOption map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"workload": map[string]any{"manifests": []any{map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": "payload", "namespace": "default"},
		"data":       map[string]any{"key": "value"},
	}}}}
	if deleteOption != nil {
		spec["deleteOption"] = deleteOption
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "work.open-cluster-management.io/v1",
		"kind":       "ManifestWork",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       spec,
	}}
}

func addOn(namespace, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "addon.open-cluster-management.io/v1alpha1",
		"kind":       "ManagedClusterAddOn",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       map[string]any{},
	}}
}

func setPropagation(policy string) func(*unstructured.Unstructured) {
	return func(w *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(w.Object, policy, "spec", "deleteOption", "propagationPolicy")
	}
}

func objectKey(obj client.Object) string {
	return obj.GetObjectKind().GroupVersionKind().Kind + " " + obj.GetName()
}

// documents splits a multi-document YAML file, skipping empty documents.
func documents(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var docs [][]byte
	reader := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := reader.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return docs
			}
			t.Fatalf("%s: %v", path, err)
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(probe) > 0 {
			docs = append(docs, doc)
		}
	}
}

// decodeStrict decodes a policy or binding, refusing unknown and duplicate
// fields, which a plain decode would drop without a word.
func decodeStrict(t *testing.T, file string, doc []byte) client.Object {
	t.Helper()
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var obj client.Object
	switch meta.GroupVersionKind() {
	case admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy"):
		obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
	case admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicyBinding"):
		obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	default:
		return nil
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("%s: %s: %v", file, meta.Kind, err)
	}
	return obj
}

// normalize is the object as generic JSON, so that equal objects compare
// equal whatever their YAML spelling.
func normalize(t *testing.T, obj client.Object) map[string]any {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func withoutStatus(obj map[string]any) map[string]any {
	if status, ok := obj["status"].(map[string]any); ok && len(status) == 0 {
		delete(obj, "status")
	}
	return obj
}

// diff lists the paths where want and got differ.
func diff(path string, want, got any) []string {
	wantMap, wantIsMap := want.(map[string]any)
	gotMap, gotIsMap := got.(map[string]any)
	if wantIsMap && gotIsMap {
		keys := map[string]bool{}
		for k := range wantMap {
			keys[k] = true
		}
		for k := range gotMap {
			keys[k] = true
		}
		var out []string
		for k := range keys {
			w, inWant := wantMap[k]
			g, inGot := gotMap[k]
			switch {
			case !inGot:
				out = append(out, fmt.Sprintf("%s.%s: missing from the file (want %s)", path, k, show(w)))
			case !inWant:
				out = append(out, fmt.Sprintf("%s.%s: not in Objects() (file has %s)", path, k, show(g)))
			default:
				out = append(out, diff(path+"."+k, w, g)...)
			}
		}
		return out
	}
	wantList, wantIsList := want.([]any)
	gotList, gotIsList := got.([]any)
	if wantIsList && gotIsList && len(wantList) == len(gotList) {
		var out []string
		for i := range wantList {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), wantList[i], gotList[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(want, got) {
		return []string{fmt.Sprintf("%s: want %s, file has %s", path, show(want), show(got))}
	}
	return nil
}

func show(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}
