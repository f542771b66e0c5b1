package operator

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// policyWindow returns the blast-radius window of a policy as its budget
// counts teardowns (record.Retention.Window), read from the manager's
// cache: its spec.blastRadius, each unset field from the operator's
// default. Admission refuses a window longer than the records are kept,
// but a policy admitted without the webhook, or stored before the records'
// age was lowered, still has one; the records it counts are kept for it.
// A policy gone, or whose budget bounds no count, keeps no record: 0.
func policyWindow(c client.Reader, def v1alpha1.BlastRadius) func(context.Context, string) (time.Duration, error) {
	return func(ctx context.Context, name string) (time.Duration, error) {
		p := &v1alpha1.CleanupPolicy{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, p); apierrors.IsNotFound(err) {
			return 0, nil
		} else if err != nil {
			return 0, err
		}
		b := decision.BudgetOf(p.Spec.BlastRadius, def, 0)
		if b.MaxTeardowns < 0 {
			return 0, nil
		}
		return b.Window, nil
	}
}
