package policy

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/fleetops-dev/cleanup-operator/internal/tally"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// hubHold says why a policy that compiled and was evaluated is not Ready
// all the same: something on the hub, not in the policy, keeps it from
// doing what it says. The reason is empty when nothing does.
func (r *CleanupPolicyReconciler) hubHold(ctx context.Context, s *share, summary string) (reason, msg string, err error) {
	if r.OperatorNamespace != "" {
		err := r.Get(ctx, client.ObjectKey{Name: r.OperatorNamespace}, &corev1.Namespace{})
		switch {
		case apierrors.IsNotFound(err):
			return v1alpha1.OperatorNamespaceMissingReason, fmt.Sprintf("the operator's namespace %s does not exist: "+
				"every teardown this policy governs is held, as its teardown record cannot be written there; "+
				"create the namespace, or run the operator with --operator-namespace naming one that exists; %s",
				r.OperatorNamespace, summary), nil
		case err != nil:
			return "", "", fmt.Errorf("reading the operator's namespace %s: %w", r.OperatorNamespace, err)
		}
	}
	return "", "", nil
}

// reportHeld makes the policy Stalled while a teardown it governs waits for
// a person, with an Event when what it names changes, and says whether it
// did.
func (r *CleanupPolicyReconciler) reportHeld(p *v1alpha1.CleanupPolicy, prev *v1alpha1.CleanupPolicyStatus, s *share, summary string) bool {
	held := s.heldMessage()
	if held == "" {
		return false
	}
	msg := held + "; " + summary
	if readyMessage(prev) != msg {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, v1alpha1.TeardownsHeldReason, "Evaluate", "%s", held)
	}
	setStalledCondition(p, v1alpha1.TeardownsHeldReason, msg)
	return true
}

// readySummary is the message of a Ready policy.
func (r *CleanupPolicyReconciler) readySummary(p *v1alpha1.CleanupPolicy) string {
	msg := fmt.Sprintf("matches %d cluster(s) and governs %d", p.Status.MatchedClusters, p.Status.GovernedClusters)
	for _, o := range p.Status.Overlaps {
		msg += fmt.Sprintf("; ties with CleanupPolicy %s (the same priority) on %d cluster(s), which %s governs by its lower name: give one a higher priority",
			o.Policy, o.Clusters, o.GovernedBy)
	}
	msg += r.Optional.OffMessage()
	if n := p.Status.NotOwned; n > 0 {
		msg += fmt.Sprintf("; %d object(s) that the operator did not create hold a step (no %s: %s label): %s",
			n, v1alpha1.ManagedByLabel, v1alpha1.ManagedBy, strings.Join(r.Tally.Examples(tally.NotOwnedMark, p.Name, maxReported), ", "))
	}
	return msg
}

// operatorNamespace passes the events of the operator's namespace only:
// its creation or deletion changes every policy's Ready.
func (r *CleanupPolicyReconciler) operatorNamespace() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == r.OperatorNamespace })
}

// reportedOnce remembers the generation of each policy whose invalid spec
// was logged, so that it is logged once per generation however many
// cluster events bring the policy back.
type reportedOnce struct {
	mu   sync.Mutex
	seen map[types.UID]int64
}

// first says whether the generation has not been reported yet, and
// remembers that it now is.
func (o *reportedOnce) first(uid types.UID, generation int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[types.UID]int64{}
	}
	if g, ok := o.seen[uid]; ok && g == generation {
		return false
	}
	o.seen[uid] = generation
	return true
}

// forget drops the policies not in live.
func (o *reportedOnce) forget(live func(types.UID) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for uid := range o.seen {
		if !live(uid) {
			delete(o.seen, uid)
		}
	}
}
