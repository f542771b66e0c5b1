package stamp

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fleetops-dev/cleanup-operator/internal/tally"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// +kubebuilder:rbac:groups=policy.open-cluster-management.io,resources=policies,verbs=get;list;watch
// The decisions ConfigMaps by name only: the operator reads them by name,
// lists and watches them through a field selector on that name, and
// creates them with a server-side apply, which the API server authorizes
// for the name applied. Teardown records have a Role in the operator's
// namespace (config/rbac/teardown_record_role.yaml).
// +kubebuilder:rbac:groups="",resources=configmaps,resourceNames=cleanup-decisions,verbs=get;list;watch;create;patch;delete

// Labels of the OCM policy framework.
const (
	// RootPolicyLabel names, on a replicated Policy, its root: <namespace>.<name>.
	RootPolicyLabel = decision.RootPolicyLabel
	// ClusterNameLabel names, on a replicated Policy, its cluster.
	ClusterNameLabel = "policy.open-cluster-management.io/cluster-name"
)

// DecisionsReconciler publishes, per namespace of root Policies, the prune
// decision for every ConfigurationPolicy template of every root Policy on
// every cluster it is placed on, in the ConfigMap cleanup-decisions, key
// <cluster>.<configurationpolicy>. The templates read it through an OCM hub
// template; the operator writes none of the Policies.
type DecisionsReconciler struct {
	client.Client
	Tally *tally.Tally
	// APIReader reads the ConfigMap from the API server: the operator
	// caches the metadata of the decisions ConfigMaps only.
	APIReader client.Reader
	// ConfigMaps is the cache of the operator's own ConfigMaps
	// (operator.OwnConfigMapsCache), whose events bring a namespace back;
	// nil: the manager's cache.
	ConfigMaps cache.Cache
	Reader     *snapshot.Reader
	Recorder   events.EventRecorder
}

// Reconcile publishes the decisions of one namespace's root Policies.
func (r *DecisionsReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := req.Name
	roots, err := r.rootPolicies(ctx, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	cm := &corev1.ConfigMap{}
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.DecisionsConfigMap}, cm)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	if exists && !decision.ManagedByOperator(cm) {
		// Another's ConfigMap of that name: neither changed nor deleted.
		return reconcile.Result{}, r.reportNotOwned(ctx, cm, roots)
	}
	r.Tally.Retain(tally.NotOwnedMark, notOwnedDecisionsKey(ns, ""), nil)
	if len(roots) == 0 {
		r.Tally.Retain(tally.UnreadMark, "Policy "+ns+"/", nil)
		// No template reads it any more: it is the operator's to remove.
		if exists {
			return reconcile.Result{}, client.IgnoreNotFound(r.Delete(ctx, cm, client.Preconditions{UID: &cm.UID}))
		}
		return reconcile.Result{}, nil
	}

	data := map[string]string{}
	marked := sets.New[string]()
	for _, root := range roots {
		if err := r.decide(ctx, root, cm.Data, data, marked); err != nil {
			return reconcile.Result{}, err
		}
	}
	r.Tally.Retain(tally.UnreadMark, "Policy "+ns+"/", marked)
	if exists && maps.Equal(cm.Data, data) {
		return reconcile.Result{}, nil // steady: no write
	}
	desired := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DecisionsConfigMap, Namespace: ns,
			Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedBy}},
		Data: data,
	}
	// The ConfigMap is the operator's own: it owns every field.
	if err := r.Patch(ctx, desired, client.Apply, client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership); err != nil {
		return reconcile.Result{}, fmt.Errorf("publishing %s/%s: %w", ns, v1alpha1.DecisionsConfigMap, err)
	}
	logf.FromContext(ctx).Info("prune decisions published", "namespace", ns, "keys", len(data))
	return reconcile.Result{}, nil
}

// rootPolicies returns the root Policies of a namespace that hold
// ConfigurationPolicy templates.
func (r *DecisionsReconciler) rootPolicies(ctx context.Context, ns string) ([]*unstructured.Unstructured, error) {
	list := newPolicyList()
	if err := r.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		p := &list.Items[i]
		if _, replicated := p.GetLabels()[RootPolicyLabel]; !replicated && len(decision.Templates(p)) > 0 && p.GetDeletionTimestamp() == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// decide adds the decisions of one root Policy to data. A decision that
// cannot be taken now (a held cluster, a rule failing, a dry run) keeps
// the value published before, if any.
func (r *DecisionsReconciler) decide(ctx context.Context, root *unstructured.Unstructured, published, data map[string]string, marked sets.Set[string]) error {
	clusters, err := r.placedOn(ctx, root)
	if err != nil {
		return err
	}
	var problems, unread []string
	tpls := decision.Templates(root)
	for _, t := range tpls {
		if !decision.ReadsDecisions(t.Definition) {
			unread = append(unread, t.Name)
		}
	}
	for _, c := range clusters {
		g, err := r.Reader.Govern(ctx, c, false)
		if err != nil {
			return err
		}
		for _, t := range tpls {
			if problem := r.decideTemplate(root, c, t, g, published, data, marked); problem != "" {
				problems = append(problems, problem)
			}
		}
	}
	if len(unread) > 0 {
		r.Recorder.Eventf(root, nil, corev1.EventTypeWarning, "DecisionNotRead", "Prune",
			"ConfigurationPolicy template(s) %s do not read pruneObjectBehavior from the %s ConfigMap; put this line in their spec: %s",
			strings.Join(unread, ", "), v1alpha1.DecisionsConfigMap, decision.DecisionHubTemplate("<name>"))
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		r.Recorder.Eventf(root, nil, corev1.EventTypeWarning, v1alpha1.EvaluationErrorReason, "Prune", "%s", strings.Join(problems, "; "))
	}
	return nil
}

// decideTemplate adds to data the decision of one ConfigurationPolicy
// template on one cluster, and returns what keeps it from being taken or
// from having an effect, if anything.
func (r *DecisionsReconciler) decideTemplate(root *unstructured.Unstructured, cluster string, t decision.Template, g *decision.Governed,
	published, data map[string]string, marked sets.Set[string]) string {
	key := cluster + "." + t.Name
	keep := func() {
		if v, ok := published[key]; ok {
			data[key] = v
		}
	}
	if g.Policy != nil && g.Policy.Spec.Prune != nil && !decision.ReadsDecisions(t.Definition) {
		mark := "Policy " + root.GetNamespace() + "/" + root.GetName() + " template " + t.Name + " on " + cluster
		r.Tally.Set(tally.UnreadMark, g.Policy.Name, mark, true)
		marked.Insert(mark)
	}
	switch {
	case g.Suspended != "":
		// A suspended policy or a paused cluster: the decision published
		// before stays, unchanged, until it is resumed.
		keep()
		return ""
	case g.Held != nil:
		keep()
		return fmt.Sprintf("%s: held: %v", key, g.Held)
	case g.Policy == nil || g.Policy.Spec.Prune == nil:
		return ""
	case g.Policy.Spec.DryRun:
		keep()
		return ""
	}
	b, err := decision.PruneBehavior(g.Policy, g.Activation, t.Definition)
	if err != nil {
		keep()
		return fmt.Sprintf("%s: %v", key, err)
	}
	data[key] = string(b)
	if decision.Ineffective(b, t.Definition) {
		return fmt.Sprintf("%s: %s has no effect while remediationAction is inform", key, b)
	}
	return ""
}

// placedOn returns the clusters a root Policy is placed on: those holding
// its replicated Policy. It reads the informer the controller watches, so
// that an event is never ahead of what the list shows.
func (r *DecisionsReconciler) placedOn(ctx context.Context, root *unstructured.Unstructured) ([]string, error) {
	list := newPolicyList()
	if err := r.List(ctx, list, client.MatchingLabels{RootPolicyLabel: root.GetNamespace() + "." + root.GetName()}); err != nil {
		return nil, err
	}
	clusters := sets.New[string]()
	for _, p := range list.Items {
		c := p.GetLabels()[ClusterNameLabel]
		if c == "" {
			c = p.GetNamespace()
		}
		clusters.Insert(c)
	}
	return sets.List(clusters), nil
}

func newPolicyList() *unstructured.UnstructuredList {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(policyGVK.GroupVersion().WithKind("PolicyList"))
	return list
}

// SetupWithManager watches Policies (root and replicated), ManagedClusters
// and CleanupPolicies, and maps them to the namespaces of root Policies.
func (r *DecisionsReconciler) SetupWithManager(mgr manager.Manager) error {
	pol := &unstructured.Unstructured{}
	pol.SetGroupVersionKind(policyGVK)
	cm := &metav1.PartialObjectMetadata{}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	cms := r.ConfigMaps
	if cms == nil {
		cms = mgr.GetCache()
	}
	return builder.ControllerManagedBy(mgr).
		Named("decisions").
		Watches(pol, handler.EnqueueRequestsFromMapFunc(rootNamespaceOf)).
		WatchesRawSource(source.Kind(cms, client.Object(cm), handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if o.GetName() != v1alpha1.DecisionsConfigMap {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
		}))).
		Watches(snapshot.NewManagedCluster(), handler.EnqueueRequestsFromMapFunc(r.rootNamespaces),
			builder.WithPredicates(predicate.Or[client.Object](predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(snapshot.NewCleanupPolicy(), handler.EnqueueRequestsFromMapFunc(r.rootNamespaces),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// rootNamespaceOf maps a root Policy to its namespace, and a replicated one
// to its root's.
func rootNamespaceOf(_ context.Context, p client.Object) []reconcile.Request {
	ns := p.GetNamespace()
	if root, ok := p.GetLabels()[RootPolicyLabel]; ok {
		ns, _, _ = strings.Cut(root, ".")
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: ns}}}
}

// rootNamespaces maps a change that can move any decision to every
// namespace holding root Policies.
func (r *DecisionsReconciler) rootNamespaces(ctx context.Context, _ client.Object) []reconcile.Request {
	if ctx.Err() != nil {
		return nil // the controller stopped: the kind may no longer be served
	}
	list := newPolicyList()
	if err := r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil { // labels and namespaces only: not copied
		logf.FromContext(ctx).Error(err, "listing Policies")
		return nil
	}
	namespaces := sets.New[string]()
	for _, p := range list.Items {
		if _, replicated := p.GetLabels()[RootPolicyLabel]; !replicated {
			namespaces.Insert(p.GetNamespace())
		}
	}
	reqs := make([]reconcile.Request, 0, namespaces.Len())
	for _, ns := range sets.List(namespaces) {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}})
	}
	return reqs
}

// notOwnedDecisionsKey names a namespace's decisions ConfigMap in the
// tally, under one policy; with policy "" it is the prefix of them all.
func notOwnedDecisionsKey(namespace, policy string) string {
	key := "ConfigMap " + namespace + "/" + v1alpha1.DecisionsConfigMap
	if policy != "" {
		key += " (decisions of " + policy + ")"
	}
	return key
}

// reportNotOwned reports a decisions ConfigMap the operator did not create:
// the decisions of the namespace's root Policies are not published, and the
// CleanupPolicies that decide for them and the root Policies say why.
func (r *DecisionsReconciler) reportNotOwned(ctx context.Context, cm *corev1.ConfigMap, roots []*unstructured.Unstructured) error {
	ns := cm.Namespace
	keep := sets.New[string]()
	msg := decision.NotOwnedMessage("ConfigMap", ns, cm.Name, cm) + fmt.Sprintf(
		"; the prune decisions of the root Policies in %s are not published until it is removed or renamed", ns)
	for _, root := range roots {
		clusters, err := r.placedOn(ctx, root)
		if err != nil {
			return err
		}
		for _, c := range clusters {
			g, err := r.Reader.Govern(ctx, c, false)
			if err != nil {
				return err
			}
			if g.Policy == nil || g.Policy.Spec.Prune == nil {
				continue
			}
			key := notOwnedDecisionsKey(ns, g.Policy.Name)
			if keep.Has(key) {
				continue
			}
			keep.Insert(key)
			on := []runtime.Object{tally.PolicyRef(g.Policy.Name, g.Policy.UID)}
			for _, root := range roots {
				on = append(on, root)
			}
			tally.ReportNotOwned(r.Tally, r.Recorder, g.Policy.Name, key, msg, on...)
		}
	}
	r.Tally.Retain(tally.NotOwnedMark, notOwnedDecisionsKey(ns, ""), keep)
	logf.FromContext(ctx).Info("decisions ConfigMap not owned, left alone", "namespace", ns)
	return nil
}
