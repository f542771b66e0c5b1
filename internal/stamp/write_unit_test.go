package stamp

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestDeleteOptionRefusesAnEmptyStamp: a stamp without a propagation policy
// would release the operator's deleteOption, and the work would be deleted
// with its resources; it is refused before any request (the client is nil).
func TestDeleteOptionRefusesAnEmptyStamp(t *testing.T) {
	w := &metav1.ObjectMeta{Namespace: "c1", Name: "app", UID: "u1"}
	result, _, err := DeleteOption(context.Background(), nil, nil, nil, w, decision.DeleteOption{})
	if err == nil || !strings.Contains(err.Error(), "c1/app") || result.Written() {
		t.Fatalf("an empty deleteOption was not refused: result %d, error %v", result, err)
	}
}

func TestSentField(t *testing.T) {
	path := []string{"spec", "deleteOption", "propagationPolicy"}
	cases := []struct {
		lastApplied string
		want        bool
		err         bool
	}{
		{`{"spec":{"workload":{}}}`, false, false},
		{`{"spec":{"deleteOption":{}}}`, false, false},
		{`{"spec":{"deleteOption":{"propagationPolicy":"Foreground"}}}`, true, false},
		{`{"spec":{"deleteOption":{"propagationPolicy":null}}}`, true, false},
		{`{"spec":{"deleteOption":"Orphan"}}`, true, false}, // not an object: sent as something
		{`{"spec":`, false, true},
	}
	for _, c := range cases {
		got, err := sentField(c.lastApplied, path)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("sentField(%s) = %v, %v; want %v, error %v", c.lastApplied, got, err, c.want, c.err)
		}
	}
}

// A conflict that is not on the defaulted field alone is decided from the
// error: the object is not read (the reader is nil).
func TestDefaultedFieldNeedsAConflictOnTheFieldAlone(t *testing.T) {
	st := stamp{gvk: schema.GroupVersionKind{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "ConfigurationPolicy"},
		defaulted: []string{"spec", "pruneObjectBehavior"}}
	conflict := func(fields ...string) error {
		err := apierrors.NewApplyConflict(nil, "conflict")
		for _, f := range fields {
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes,
				metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl-client-side-apply"`, Field: f})
		}
		return err
	}
	cases := []struct {
		name string
		err  error
		why  string
	}{
		{"not an API error", errors.New("boom"), ""},
		{"no field named", conflict(), ""},
		{"another field", conflict(".metadata.annotations.cleanup.fleetops.dev/prune"), "the conflict is on .metadata.annotations.cleanup.fleetops.dev/prune"},
		{"the field and another", conflict(".spec.pruneObjectBehavior", ".spec.severity"), "the conflict is on .spec.severity"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			managers, _, why, err := defaultedField(context.Background(), nil, nil, st, c.err)
			if err != nil || managers != nil || why != c.why {
				t.Errorf("got %v, %q, %v; want no managers, %q", managers, why, err, c.why)
			}
		})
	}
}
