package v1alpha1

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
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

	// Suspending is admitted, with a warning saying what it stops.
	suspended := fixed.DeepCopy()
	suspended.Spec.Suspend = true
	w, err = v.ValidateUpdate(context.Background(), fixed, suspended)
	if err != nil || len(w) != 2 || w[1] != SuspendWarning {
		t.Fatalf("suspend: warnings %q, error %v: want the suspend warning", w, err)
	}
	// Suspending does not let an invalid policy in.
	brokenSuspended := broken.DeepCopy()
	brokenSuspended.Spec.Suspend = true
	if _, err := v.ValidateCreate(context.Background(), brokenSuspended); !apierrors.IsInvalid(err) {
		t.Fatalf("suspended invalid policy: got %v, want Invalid", err)
	}

	// Rules that read manifests are reported; rules that read their
	// identity only are not.
	identity := fixed.DeepCopy()
	identity.Spec.ClusterSelector = ""
	identity.Spec.Orphaning = []v1alpha1.OrphaningRule{{Name: "crds", When: "manifest.kind == 'CustomResourceDefinition'"}}
	if w, err := v.ValidateCreate(context.Background(), identity); err != nil || strings.Contains(strings.Join(w, "\n"), ReadsManifestsWarning) {
		t.Fatalf("identity only: warnings %q, error %v; want no warning that it reads manifests", w, err)
	}
	reads := identity.DeepCopy()
	reads.Spec.Orphaning[0].When = "manifest.?data.?keep.orValue('') == 'yes'"
	if w, err := v.ValidateCreate(context.Background(), reads); err != nil || !strings.Contains(strings.Join(w, "\n"), ReadsManifestsWarning) {
		t.Fatalf("data: warnings %q, error %v; want the warning that it reads manifests", w, err)
	}
}

func TestHandlerReadsStoredPolicies(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	h := &handler{validator: &CleanupPolicyValidator{Env: env}}
	policy := func(labels, timeout string) []byte {
		return []byte(`{"apiVersion":"cleanup.fleetops.dev/v1alpha1","kind":"CleanupPolicy","metadata":{"name":"p"` + labels +
			`},"spec":{"removeStrategy":{"default":"Required","timeout":"` + timeout + `"}}}`)
	}
	request := func(op admissionv1.Operation, obj, old []byte) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: op, Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: old},
		}}
	}
	labelled := `,"labels":{"a":"b"}`
	cases := []struct {
		name    string
		req     admission.Request
		allowed bool
	}{
		{"create with a timeout that is a word", request(admissionv1.Create, policy("", "soon"), nil), false},
		{"create with a valid timeout", request(admissionv1.Create, policy("", "5m"), nil), true},
		{"relabel a policy stored with a word", request(admissionv1.Update, policy(labelled, "soon"), policy("", "soon")), true},
		{"fix a policy stored with a word", request(admissionv1.Update, policy("", "5m"), policy("", "soon")), true},
		{"change a stored word into another", request(admissionv1.Update, policy("", "later"), policy("", "soon")), false},
		{"break a valid timeout", request(admissionv1.Update, policy("", "never"), policy("", "5m")), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.Handle(context.Background(), tc.req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v: %+v", resp.Allowed, tc.allowed, resp.Result)
			}
			if !tc.allowed && !strings.Contains(resp.Result.Message, "spec.removeStrategy.timeout") {
				t.Fatalf("refusal %q does not name spec.removeStrategy.timeout", resp.Result.Message)
			}
		})
	}
}

// TestSignalLimits: the webhook refuses a deletion-signal manifest of a
// kind outside the allow list, one over the size limit and manifests over
// the total, naming each manifest; the allowed ones pass.
func TestSignalLimits(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	v := &CleanupPolicyValidator{Env: env, SignalLimits: admissionpolicy.SignalLimits{Kinds: []string{"v1/ConfigMap"}, MaxBytes: 200, MaxTotalBytes: 300}}
	configMap := func(name string, pad int) v1alpha1.Manifest {
		raw := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default"},"data":{"x":"` + strings.Repeat("x", pad) + `"}}`
		return v1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(raw)}}
	}
	withSignal := func(m ...v1alpha1.Manifest) *v1alpha1.CleanupPolicy {
		return &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
			DeletionSignal: &v1alpha1.DeletionSignal{Manifests: m}}}
	}
	if _, err := v.ValidateCreate(context.Background(), withSignal(configMap("a", 10), configMap("b", 10))); err != nil {
		t.Fatalf("allowed manifests refused: %v", err)
	}
	secret := v1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`)}}
	for _, c := range []struct {
		name string
		p    *v1alpha1.CleanupPolicy
		want []string
	}{
		{"a kind not allowed", withSignal(configMap("a", 10), secret), []string{`spec.deletionSignal.manifests[1].kind: Unsupported value: "v1/Secret"`}},
		{"a manifest too large", withSignal(configMap("a", 10), configMap("big", 200)), []string{"spec.deletionSignal.manifests[1]: Too long", "200"}},
		{"too much in all", withSignal(configMap("a", 100), configMap("b", 100)), []string{"spec.deletionSignal.manifests: Invalid value", "more than 300 bytes"}},
	} {
		_, err := v.ValidateCreate(context.Background(), c.p)
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: got %v, want Invalid", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}

// TestWindowLongerThanRecords: a blast-radius window longer than the
// records are kept is refused, naming the field and the flag; as long, or
// with no bound on the records' age, it is admitted.
func TestWindowLongerThanRecords(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	withWindow := func(d time.Duration) *v1alpha1.CleanupPolicy {
		return &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
			BlastRadius:    &v1alpha1.BlastRadius{Window: &metav1.Duration{Duration: d}}}}
	}
	v := &CleanupPolicyValidator{Env: env, RecordMaxAge: 24 * time.Hour}
	_, err = v.ValidateCreate(context.Background(), withWindow(25*time.Hour))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.blastRadius.window") || !strings.Contains(err.Error(), "--teardown-record-max-age 24h0m0s") {
		t.Errorf("got %v, want Invalid naming spec.blastRadius.window and --teardown-record-max-age", err)
	}
	if _, err := v.ValidateCreate(context.Background(), withWindow(24*time.Hour)); err != nil {
		t.Errorf("a window as long as the records' age refused: %v", err)
	}
	v.RecordMaxAge = 0
	if _, err := v.ValidateCreate(context.Background(), withWindow(1000*time.Hour)); err != nil {
		t.Errorf("records kept whatever their age, a long window refused: %v", err)
	}
}
