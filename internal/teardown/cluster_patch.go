package teardown

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterPatch is the one writer of a ManagedCluster in its teardown, made
// once per reconcile from the cluster as read. The teardown changes the
// cluster in memory (its annotations, the ContentDeleteSuccess condition)
// and flushes the changes where the order of writes matters, each flush
// named after what must be on the cluster before what follows it:
//
//	flushUnconfirmed      the works' unconfirmed orphans, before they are deleted
//	flushForcing          the objects about to be forced, before any finalizer goes
//	flushReport           the step's condition, at the end of the step
//	flushBeforeFinalizer  the outcome, before the record ends and the finalizer goes
//	removeFinalizer       the operator's finalizer, last
//
// Every write is on the cluster as last read or written: the metadata and
// the status go in merge patches carrying the resourceVersion, as the
// teardown reads, changes and writes back values another writer may have
// changed (the annotations' lists and counts; the conditions list, which a
// merge patch replaces whole), so a change another writer made since (OCM's registration controllers write
// the cluster's labels, annotations and status) is a conflict, never
// overwritten. A conflict returns an error and nothing after the flush is
// written; the other writer's event brings the cluster back.
type clusterPatch struct {
	client client.Client
	// mc is the cluster as the teardown changed it: what it reads.
	mc *unstructured.Unstructured
	// base is the cluster as read, or as the last write returned it.
	base *unstructured.Unstructured
	// written: a write of this helper returned base.
	written bool
}

// flushed is what a flush wrote.
type flushed struct {
	metadata, status bool
	// checked: nothing had changed, and an empty patch on the
	// resourceVersion confirmed the cluster is as base has it.
	checked bool
}

// check says when a flush with nothing to write still confirms that the
// cluster is as the teardown read it: before a write that acts on what it
// read (the cluster unavailable, not paused), a cluster changed since is a
// conflict, as a write with something to write would be.
type check int

const (
	// noCheck: nothing changed, nothing is sent.
	noCheck check = iota
	// checkAlways: an empty patch on the resourceVersion whenever
	// nothing changed.
	checkAlways
	// checkIfUnwritten: an empty patch only while this helper has written
	// nothing, so base is still the cluster as read (from a cache that may
	// lag behind the teardown's own last write).
	checkIfUnwritten
)

func newClusterPatch(c client.Client, mc *unstructured.Unstructured) *clusterPatch {
	return &clusterPatch{client: c, mc: mc, base: mc.DeepCopy()}
}

// annotate sets an annotation, in memory.
func (p *clusterPatch) annotate(key, value string) { SetAnnotation(p.mc, key, value) }

// setCondition sets ContentDeleteSuccess, the one condition the operator
// owns on the cluster, in memory, and says whether it changed. The other
// controllers' conditions are kept as read.
func (p *clusterPatch) setCondition(status metav1.ConditionStatus, reason, message string) bool {
	return setContentDeleteCondition(p.mc, status, reason, message)
}

// flushUnconfirmed writes the unconfirmed orphans recorded, before the
// works they name are deleted: the outcome reports them after a restart.
func (p *clusterPatch) flushUnconfirmed(ctx context.Context) (flushed, error) {
	return p.flush(ctx, "recording the unconfirmed orphans", checkAlways)
}

// flushForcing writes the count of forced objects and the batch about to
// be forced, before any finalizer is removed: a teardown that forced
// anything never ends as Completed, whenever the operator stops. A batch
// recorded already (a force retried, or cut by a restart) is still
// checked: a force decided on a cluster read unavailable or not paused
// must not go once it is available or paused again.
func (p *clusterPatch) flushForcing(ctx context.Context) (flushed, error) {
	return p.flush(ctx, "recording the forced objects", checkAlways)
}

// flushReport writes the step's condition, at the end of the step.
func (p *clusterPatch) flushReport(ctx context.Context) (flushed, error) {
	return p.flush(ctx, "reporting the step", noCheck)
}

// flushBeforeFinalizer writes the outcome, before the record ends and the
// finalizer goes: a cluster gone says how its teardown ended. An outcome
// the cluster, as read, carries already is checked: the cache may not
// show a report written over it since (a record that failed to end).
func (p *clusterPatch) flushBeforeFinalizer(ctx context.Context) (flushed, error) {
	return p.flush(ctx, "writing the outcome", checkIfUnwritten)
}

// flush writes what changed in memory since the cluster was read or last
// written: the metadata (labels, annotations) first, then the status, each
// in a merge patch on the resourceVersion; with nothing changed, it checks
// the cluster as c says. why names the flush in errors.
func (p *clusterPatch) flush(ctx context.Context, why string, c check) (flushed, error) {
	var done flushed
	if p.metadataSame() && p.statusSame() && (c == checkAlways || c == checkIfUnwritten && !p.written) {
		after := p.base.DeepCopy()
		if err := p.client.Patch(ctx, after, client.MergeFromWithOptions(p.base, client.MergeFromWithOptimisticLock{})); err != nil {
			return done, fmt.Errorf("%s of %s: %w", why, p.mc.GetName(), err)
		}
		p.wrote(after, false, false)
		done.checked = true
		return done, nil
	}
	if !p.metadataSame() {
		after := p.base.DeepCopy()
		after.SetLabels(p.mc.GetLabels())
		after.SetAnnotations(p.mc.GetAnnotations())
		if err := p.client.Patch(ctx, after, client.MergeFromWithOptions(p.base, client.MergeFromWithOptimisticLock{})); err != nil {
			return done, fmt.Errorf("%s of %s: %w", why, p.mc.GetName(), err)
		}
		p.wrote(after, false, !p.statusSame())
		done.metadata = true
	}
	if !p.statusSame() {
		after := p.base.DeepCopy()
		setStatus(after, p.mc.Object["status"])
		if err := p.client.Status().Patch(ctx, after, client.MergeFromWithOptions(p.base, client.MergeFromWithOptimisticLock{})); err != nil {
			return done, fmt.Errorf("%s of %s: %w", why, p.mc.GetName(), err)
		}
		p.wrote(after, !p.metadataSame(), false)
		done.status = true
	}
	return done, nil
}

// removeFinalizer removes the finalizer, and the annotations named, from
// the cluster: the teardown's last write, after anything still in memory
// is flushed. It says whether it removed it: not when the cluster, as
// read, no longer carries it.
//
// A JSON patch, not a merge patch: the finalizers are a list, which a
// merge patch replaces whole. Without the resourceVersion it would drop a
// finalizer another controller added since the read; with it, any other
// write since (OCM's controllers write the cluster's status) would refuse
// the teardown's last write. The JSON patch tests exactly what the removal
// relies on, the cluster's UID and the finalizer at its index, and removes
// the annotations only where they are: a finalizer moved, or an annotation
// gone, is refused (Invalid), never written over; so is, when only is
// true, a finalizer added since the read.
func (p *clusterPatch) removeFinalizer(ctx context.Context, finalizer string, annotations []string, only bool) (bool, error) {
	if _, err := p.flush(ctx, "removing the finalizer", noCheck); err != nil {
		return false, err
	}
	patch, ok := removeFinalizerPatch(p.base, finalizer, annotations, only)
	if !ok {
		return false, nil
	}
	after := p.base.DeepCopy()
	if err := p.client.Patch(ctx, after, patch); err != nil {
		return false, err
	}
	p.wrote(after, false, false)
	return true, nil
}

// metadataSame says whether the labels and annotations are as last written.
func (p *clusterPatch) metadataSame() bool {
	return maps.Equal(p.base.GetLabels(), p.mc.GetLabels()) && maps.Equal(p.base.GetAnnotations(), p.mc.GetAnnotations())
}

// statusSame says whether the status is as last written.
func (p *clusterPatch) statusSame() bool {
	return equality.Semantic.DeepEqual(p.base.Object["status"], p.mc.Object["status"])
}

// wrote takes the cluster a write returned as the new base, and as the
// cluster the teardown reads, keeping the metadata or the status changed
// in memory that the write did not carry.
func (p *clusterPatch) wrote(server *unstructured.Unstructured, keepMetadata, keepStatus bool) {
	next := server.DeepCopy()
	if keepMetadata {
		next.SetLabels(p.mc.GetLabels())
		next.SetAnnotations(p.mc.GetAnnotations())
	}
	if keepStatus {
		setStatus(next, p.mc.Object["status"])
	}
	p.base, p.written = server, true
	p.mc.Object = next.Object
}

// setStatus sets the object's status to a copy of status; nil removes it.
func setStatus(obj *unstructured.Unstructured, status any) {
	if status == nil {
		delete(obj.Object, "status")
		return
	}
	obj.Object["status"] = runtime.DeepCopyJSONValue(status)
}
