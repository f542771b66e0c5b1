package admissionpolicy

import (
	"context"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// RestoredReason is the reason of the Event on an object the guard put back.
const RestoredReason = "GuardRestored"

// OperatorUser asks the API server who the client authenticates as (a
// SelfSubjectReview, which every authenticated user may create): the user
// the protection policies let through.
func OperatorUser(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("asking the API server who the operator is: %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

// Guard puts back, as soon as their watch event arrives, the admission and
// flow-control objects the operator relies on when they are deleted or
// their spec (or the operator's labels) changed, and reports each: a
// log line, an Event on the object, and Restored.
type Guard struct {
	// Client writes the objects; APIReader reads them live.
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Objects are the objects as the operator renders them.
	Objects []client.Object
	// Restored is called for each object put back, with what happened
	// to it: "deleted" or "changed".
	Restored func(kind, name, change string)
}

// key names an object of Objects in a request: its kind and name.
func key(obj client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetObjectKind().GroupVersionKind().Kind, Name: obj.GetName()}
}

// SetupWithManager watches each kind of Objects; an event of an object of
// their names brings it to Reconcile, as does the start.
func (g *Guard) SetupWithManager(mgr manager.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named("admission-guard")
	seen := map[string]bool{}
	for _, obj := range g.Objects {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if seen[gvk.Kind] {
			continue
		}
		seen[gvk.Kind] = true
		watched := &unstructured.Unstructured{}
		watched.SetGroupVersionKind(gvk)
		kind := gvk.Kind
		b = b.Watches(watched, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: kind, Name: o.GetName()}}
			if g.desired(req.NamespacedName) == nil {
				return nil
			}
			return []reconcile.Request{req}
		}), builder.OnlyMetadata)
	}
	// Each object once at start: one deleted while the operator was down,
	// or before the watch began, has no event of its own.
	b = b.WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		for _, obj := range g.Objects {
			q.Add(reconcile.Request{NamespacedName: key(obj)})
		}
		return nil
	}))
	return b.Complete(g)
}

func (g *Guard) desired(k types.NamespacedName) client.Object {
	for _, obj := range g.Objects {
		if key(obj) == k {
			return obj
		}
	}
	return nil
}

// Reconcile puts one object back when it is missing or drifted.
func (g *Guard) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	want := g.desired(req.NamespacedName)
	if want == nil {
		return reconcile.Result{}, nil
	}
	want = want.DeepCopyObject().(client.Object)
	kind := req.Namespace
	cur := want.DeepCopyObject().(client.Object)
	err := g.APIReader.Get(ctx, client.ObjectKeyFromObject(want), cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := g.Client.Create(ctx, want, client.FieldOwner(v1alpha1.FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("restoring %s %s: %w", kind, want.GetName(), err)
		}
		g.report(ctx, want, kind, "deleted")
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, err
	}
	drifted, fixed, err := g.drift(ctx, cur, want)
	if err != nil || !drifted {
		return reconcile.Result{}, err
	}
	// The restore's time, written with it, moves the object's managed
	// fields even when the restore only removes fields (v1alpha1.RestoredAtAnnotation).
	annotations := fixed.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[v1alpha1.RestoredAtAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
	fixed.SetAnnotations(annotations)
	if err := g.Client.Update(ctx, fixed, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		return reconcile.Result{}, fmt.Errorf("restoring %s %s: %w", kind, want.GetName(), err)
	}
	g.report(ctx, fixed, kind, "changed")
	return reconcile.Result{}, nil
}

// drift says whether cur differs from want in its spec or the operator's
// labels, and returns cur with want's spec and labels. The spec is compared
// as the API server defaults it: a dry-run update of the fix returns it.
func (g *Guard) drift(ctx context.Context, cur, want client.Object) (bool, client.Object, error) {
	fixed, err := withSpec(cur, want)
	if err != nil {
		return false, nil, err
	}
	labelsDrifted := false
	labels := fixed.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range want.GetLabels() {
		if labels[k] != v {
			labels[k], labelsDrifted = v, true
		}
	}
	fixed.SetLabels(labels)
	dry := fixed.DeepCopyObject().(client.Object)
	if err := g.Client.Update(ctx, dry, client.DryRunAll, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		return false, nil, fmt.Errorf("comparing %s with what the operator renders: %w", cur.GetName(), err)
	}
	a, b, err := specOf(dry), specOf(cur), error(nil)
	return labelsDrifted || !equality.Semantic.DeepEqual(a, b), fixed, err
}

// withSpec is cur with want's spec.
func withSpec(cur, want client.Object) (client.Object, error) {
	c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cur)
	if err != nil {
		return nil, err
	}
	w, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return nil, err
	}
	c["spec"] = w["spec"]
	out := cur.DeepCopyObject().(client.Object)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c, out); err != nil {
		return nil, err
	}
	return out, nil
}

func specOf(obj client.Object) any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil
	}
	return u["spec"]
}

func (g *Guard) report(ctx context.Context, obj client.Object, kind, change string) {
	logf.FromContext(ctx).Info("guard object restored: the operator's protection depends on it", "kind", kind, "name", obj.GetName(), "change", change)
	if g.Recorder != nil {
		g.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, RestoredReason, "Restore",
			"%s %s was %s; the cleanup operator put it back as it renders it (its protection depends on it)", kind, obj.GetName(), change)
	}
	if g.Restored != nil {
		g.Restored(kind, obj.GetName(), change)
	}
}

// CanRestore says whether the client may watch, create and update every
// kind of objs; when it may not, the answer names what is missing (the
// bootstrap role, config/rbac/bootstrap_role.yaml, grants them).
func CanRestore(ctx context.Context, c client.Client, objs []client.Object) (string, error) {
	var missing []string
	seen := map[string]bool{}
	for _, obj := range objs {
		gvk := obj.GetObjectKind().GroupVersionKind()
		resource := strings.ToLower(gvk.Kind) + "s"
		if gvk.Kind == "ValidatingAdmissionPolicy" {
			resource = "validatingadmissionpolicies"
		}
		for _, verb := range []string{"list", "watch", "create", "update"} {
			k := verb + " " + resource
			if seen[k] {
				continue
			}
			seen[k] = true
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: gvk.Group, Resource: resource, Verb: verb}}}
			if err := c.Create(ctx, review); err != nil {
				return "", fmt.Errorf("asking whether the operator may %s: %w", k, err)
			}
			if !review.Status.Allowed {
				missing = append(missing, k+"."+gvk.Group)
			}
		}
	}
	if len(missing) == 0 {
		return "", nil
	}
	return "the operator may not " + strings.Join(missing, ", ") +
		" (the ClusterRole cleanup-operator-bootstrap-role grants them): it cannot restore its admission and flow-control objects when they are removed or changed", nil
}
