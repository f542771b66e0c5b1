package policy

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// guardedMessage is how every Guarded True message begins.
const guardedMessage = "the operator puts back its admission policies, their bindings and its flow-control objects when they are deleted or changed"

// GuardState is what the guard of the operator's admission and
// flow-control objects tells the CleanupPolicy reconciler, which says it
// on every policy as the Guarded condition. The operator makes one at
// setup and gives it to both.
type GuardState struct {
	mu sync.Mutex
	// status, reason and message are the condition; an empty reason says
	// nothing is known yet, and no condition is written.
	status          metav1.ConditionStatus
	reason, message string
	// changed wakes every policy when the condition changes.
	changed chan event.TypedGenericEvent[client.Object]
}

// NewGuardState returns a state that knows nothing yet.
func NewGuardState() *GuardState {
	return &GuardState{changed: make(chan event.TypedGenericEvent[client.Object], 1)}
}

// Running says that the guard started.
func (s *GuardState) Running() {
	s.set(metav1.ConditionTrue, v1alpha1.GuardsInPlaceReason, guardedMessage+"; it has put back none since it started")
}

// Unrestorable says that the guard could not start; why names the rights
// the operator lacks.
func (s *GuardState) Unrestorable(why string) {
	s.set(metav1.ConditionFalse, v1alpha1.GuardUnrestorableReason, why)
}

// Restored records that the guard put kind name back at the time given,
// after it was changed or deleted (change).
func (s *GuardState) Restored(kind, name, change string, at time.Time) {
	s.set(metav1.ConditionTrue, v1alpha1.GuardsInPlaceReason, fmt.Sprintf("%s; the last it put back since it started: %s %s was %s; put back at %s",
		guardedMessage, kind, name, change, at.UTC().Format(time.RFC3339)))
}

func (s *GuardState) set(status metav1.ConditionStatus, reason, message string) {
	s.mu.Lock()
	same := s.status == status && s.reason == reason && s.message == message
	s.status, s.reason, s.message = status, reason, message
	s.mu.Unlock()
	if same {
		return
	}
	select {
	case s.changed <- event.TypedGenericEvent[client.Object]{Object: &metav1.PartialObjectMetadata{}}:
	default: // a wake-up is already due
	}
}

// source wakes its handler when the condition changes.
func (s *GuardState) source(h handler.EventHandler) source.Source {
	return source.Channel(s.changed, h)
}

// setGuardedCondition sets the policy's Guarded condition as the guard
// last said; nothing while the state is nil or knows nothing. An unchanged
// condition leaves the status as it was, so that no write follows.
func setGuardedCondition(p *v1alpha1.CleanupPolicy, s *GuardState) {
	if s == nil {
		return
	}
	s.mu.Lock()
	status, reason, message := s.status, s.reason, s.message
	s.mu.Unlock()
	if reason == "" {
		return
	}
	prev := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.GuardedCondition)
	if p.Spec.Suspend && prev != nil && prev.Status == status && prev.Reason == reason && prev.Message == message {
		// A suspended policy's new generation writes nothing: the
		// condition keeps the generation it was written at while the
		// guard says the same.
		return
	}
	setCondition(p, v1alpha1.GuardedCondition, status, reason, message)
}
