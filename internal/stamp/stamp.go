package stamp

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/metrics"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
	"github.com/fleetops-dev/cleanup-operator/internal/tally"
	"github.com/fleetops-dev/cleanup-operator/internal/watch"
)

// stamp is one decision to write on an object: fields under spec, and an
// annotation recording the decision.
type stamp struct {
	gvk        schema.GroupVersionKind
	kind       string                // the object's kind, for the tally and metrics
	action     string                // the event action: Orphaning, Prune
	field      string                // the field written, for messages
	annotation string                // records the decision on the object
	value      string                // the decision; "" gives up what the operator owned
	spec       func() map[string]any // the spec fields to apply, made only for a write
	describe   string                // the decision, for people
	// defaulted is the path of the field the object's CRD defaults, which
	// the operator may take from a creator that never wrote it.
	defaulted []string
	// released is what the operator applies instead of nothing when it
	// gives the decision up and the API server refuses the apply of
	// nothing: when another manager wrote the field's parent empty, giving
	// the field up leaves that parent null, which the schema refuses. It
	// holds the CRD's default. Like spec, made only for a write: most
	// reconciles find the decision in place.
	released func() map[string]any
}

// stamper writes decisions on objects the operator does not own: with
// server-side apply of just the decided fields, never forced, never in a
// write war, and counting what it could not write in the policy's tally.
type stamper struct {
	Client client.Client
	// APIReader reads an object from the API server, managedFields
	// included, after an apply conflicted.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Tally     *tally.Tally
	Metrics   *metrics.Metrics

	guard applyGuard
}

// stampDecision is what an adapter decides for one object.
type stampDecision struct {
	stamp stamp
	// current says the object's field holds the decision already.
	current bool
	// pending says, for a dry run, that the object does not carry it yet.
	pending bool
}

// reconcileStamp is the reconcile the stamped kinds share. An object being
// deleted is forgotten and left alone, and so is one skip says is not the
// adapter's to stamp; a held one is left as it is and logged; a decision
// that fails is reported and nothing is written. Otherwise the decision
// (decide is called with g.Policy possibly nil: none governs, which gives
// the stamp up) is previewed in dry run or settled. It reports whether it
// wrote.
func (s *stamper) reconcileStamp(ctx context.Context, obj client.Object, g *decision.Governed, skip bool, kind, action string,
	decide func() (stampDecision, error)) (bool, error) {
	// Made only to be written to: the values are encoded when added.
	log := func() logr.Logger {
		return logf.FromContext(ctx).WithValues("kind", kind, "name", obj.GetName(), "namespace", obj.GetNamespace())
	}
	switch {
	case obj.GetDeletionTimestamp() != nil:
		s.forget(obj, kind)
		return false, nil
	case skip:
		s.notRetrying(obj, kind)
		return false, nil
	case g.Held != nil:
		s.notRetrying(obj, kind)
		log().Info("held: no decision stamped", "reason", g.Held.Error())
		return false, nil
	}
	d, err := decide()
	if err != nil {
		s.notRetrying(obj, kind)
		s.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, v1alpha1.EvaluationErrorReason, action,
			"not stamped, the decision failed: %v", err)
		log().Info("decision failed; not stamped", "error", err.Error())
		return false, nil
	}
	defer s.recheck(ctx, obj, kind)
	policy := ""
	if g.Policy != nil {
		policy = g.Policy.Name
		if g.Policy.Spec.DryRun {
			s.notRetrying(obj, kind)
			s.preview(obj, policy, d.stamp, d.pending)
			return false, nil
		}
	}
	return s.settle(ctx, obj, policy, d.stamp, obj.GetAnnotations()[d.stamp.annotation] != "", d.current)
}

// recheck forgets the object again if it went away while the reconcile
// that just marked it ran: the event that forgets it (the mark of its
// deletion, or its delete) may have come before the marks were written.
// The cache holds a change before its event is handed out, so either this
// read sees the change or that event's forget comes after the marks. An
// object re-created under the name keeps the marks its own reconcile sets;
// only the old one's apply count goes.
func (s *stamper) recheck(ctx context.Context, obj client.Object, kind string) {
	if !s.Tally.Marked(tally.TallyKey(kind, obj)) && !s.guard.has(obj.GetUID()) {
		return
	}
	now := obj.DeepCopyObject().(client.Object)
	err := s.Client.Get(ctx, client.ObjectKeyFromObject(obj), now)
	switch {
	case apierrors.IsNotFound(err), err == nil && now.GetUID() == obj.GetUID() && now.GetDeletionTimestamp() != nil:
		s.forget(obj, kind)
	case err == nil && now.GetUID() != obj.GetUID():
		s.guard.forget(obj.GetUID())
	}
}

// forget drops what the stamper keeps of an object going away: its apply
// count, and its marks in the tally, which the policy's status would
// otherwise go on counting (the policies whose marks change are woken).
func (s *stamper) forget(obj client.Object, kind string) {
	s.guard.forget(obj.GetUID())
	key := tally.TallyKey(kind, obj)
	s.Tally.Record("", key, false, false, false)
	s.Tally.Set(tally.DryRunMark, "", key, false)
}

// notRetrying clears the object's write-failed mark where no write of a
// decision follows (a skip, a hold, a failed decision, a dry run), so that
// the status does not count a write the operator no longer retries.
func (s *stamper) notRetrying(obj client.Object, kind string) {
	s.Tally.Set(tally.WriteFailedMark, "", tally.TallyKey(kind, obj), false)
}

// settle writes the decision unless the object carries it already: stamped
// says whether the object has the operator's annotation, current whether its
// field holds the decision. It reports whether it wrote.
func (s *stamper) settle(ctx context.Context, obj client.Object, policy string, st stamp, stamped, current bool) (bool, error) {
	key := tally.TallyKey(st.kind, obj)
	s.Tally.Set(tally.DryRunMark, policy, key, false)
	if (st.value == "" && !stamped) || (st.value != "" && stamped && current) {
		s.Tally.Record(policy, key, false, false, false)
		if s.guard.confirm(obj.GetUID()) {
			s.Tally.Touch(policy) // the policy counts what its cache now shows
		}
		return false, nil // steady: no write
	}
	if !s.guard.mayApply(obj, st.describe, s.Recorder, st.action, st.field) {
		s.Tally.Record(policy, key, false, true, false)
		return false, nil
	}
	conflict, err := s.apply(ctx, obj, st)
	s.guard.outcome(obj, err, s.Recorder, st.action, st.field, st.describe)
	s.Tally.Record(policy, key, conflict, false, refused(err))
	return !conflict && err == nil, err
}

// preview reports, in dry run, a decision the object does not carry yet.
func (s *stamper) preview(obj client.Object, policy string, st stamp, pending bool) {
	if pending {
		s.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, v1alpha1.DryRunReason, st.action,
			"dry run: would set %s %s", st.field, st.describe)
	}
	s.Tally.Set(tally.DryRunMark, policy, tally.TallyKey(st.kind, obj), pending)
}

func (s *stamper) apply(ctx context.Context, obj client.Object, st stamp) (conflict bool, err error) {
	_, why, err := write(ctx, s.Client, s.APIReader, obj, st)
	if apierrors.IsInvalid(err) && st.value == "" && st.released != nil {
		release := stampPatch(obj, st)
		release.Object["spec"] = st.released()
		err = s.Client.Patch(ctx, release, client.Apply, client.FieldOwner(v1alpha1.FieldManager))
	}
	if why != "" {
		err = fmt.Errorf("%w (%s is not a default nobody wrote: %s)", err, strings.Join(st.defaulted, "."), why)
	}
	switch {
	case apierrors.IsConflict(err):
		s.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "Conflict", st.action,
			"left alone: another manager owns %s, the operator would set %s: %v", st.field, st.describe, err)
		return true, nil
	case err != nil:
		return false, client.IgnoreNotFound(err)
	}
	// A routine stamp is recorded by the annotation it writes and by a
	// metric; events are kept for what needs a person.
	s.Metrics.CountStamped(st.kind, cmp.Or(st.value, "Released"))
	logf.FromContext(ctx).V(1).Info("decision stamped", "kind", st.kind, "name", obj.GetName(), "namespace", obj.GetNamespace(), "decision", st.describe)
	return false, nil
}

// stampEvents is the stamped kinds' controller-wide event filter: changes
// of spec (the API server counts the mark of a deletion as one), labels or
// annotations, a re-creation under the same name, and every event of the
// policies and clusters watched.
var stampEvents = predicate.Or[client.Object](
	predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{},
	recreated{}, policyOrClusterEvents{})

// recreated lets through an update from one object to another of the same
// name: after a gap in the watch the informer hands a deletion and
// re-creation on that way, and the new object may have the old one's
// generation, labels and annotations, but not its decision.
type recreated struct{ predicate.Funcs }

func (recreated) Update(e event.UpdateEvent) bool {
	return e.ObjectOld.GetUID() != e.ObjectNew.GetUID()
}

// stampWatches reconciles a stamped kind when its spec, labels or
// annotations change (not its status), when its cluster's labels or
// governing policy change, and when a policy changes.
func stampWatches(b *builder.Builder, ofCluster, ofPolicy handler.MapFunc) *builder.Builder {
	return b.
		WithEventFilter(stampEvents).
		Watches(snapshot.NewManagedCluster(), handler.EnqueueRequestsFromMapFunc(ofCluster),
			builder.WithPredicates(predicate.Or[client.Object](predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(snapshot.NewCleanupPolicy(), handler.EnqueueRequestsFromMapFunc(ofPolicy),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
}

// clustersOf returns the clusters that name the policy as their governor,
// through the governing-policy index. Only their names are read: the list
// is not copied from the cache, which at a policy's change would copy every
// cluster it governs at once (a 10,000-cluster fleet's peak memory).
func clustersOf(ctx context.Context, c client.Reader, policy string) (sets.Set[string], error) {
	clusters := snapshot.NewManagedClusterList()
	if err := c.List(ctx, clusters, client.MatchingFields{watch.GoverningPolicyIndex: policy}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	names := sets.New[string]()
	for i := range clusters.Items {
		names.Insert(clusters.Items[i].GetName())
	}
	return names, nil
}
