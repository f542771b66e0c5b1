package controller

import (
	"cmp"
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/policy"
)

// +kubebuilder:rbac:groups=policy.open-cluster-management.io,resources=configurationpolicies,verbs=get;list;watch;patch

// PruneAnnotation records, on a ConfigurationPolicy, the pruneObjectBehavior
// the operator stamped; it is written in the same apply.
const PruneAnnotation = "cleanup.fleetops.dev/prune"

var (
	configurationPolicyGVK = schema.GroupVersionKind{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "ConfigurationPolicy"}
	policyGVK              = schema.GroupVersionKind{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "Policy"}
)

// ConfigurationPolicyAdapter stamps spec.pruneObjectBehavior on standalone
// ConfigurationPolicies. Those that come from an OCM Policy are never
// written: the policy framework would revert them.
type ConfigurationPolicyAdapter struct {
	Client   client.Client
	Recorder events.EventRecorder
	Tally    *Tally

	guard applyGuard
}

var _ Adapter[*unstructured.Unstructured] = &ConfigurationPolicyAdapter{}

// Name implements Adapter.
func (a *ConfigurationPolicyAdapter) Name() string { return "configurationpolicy" }

// New implements Adapter.
func (a *ConfigurationPolicyAdapter) New() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(configurationPolicyGVK)
	return u
}

// ClusterName implements Adapter: a ConfigurationPolicy's cluster is its namespace.
func (a *ConfigurationPolicyAdapter) ClusterName(cp *unstructured.Unstructured) string {
	return cp.GetNamespace()
}

// Standalone implements standaloneAdapter: a ConfigurationPolicy whose
// namespace names no ManagedCluster is governed by the highest-priority
// policy that selects every cluster.
func (a *ConfigurationPolicyAdapter) Standalone() bool { return true }

// Reconcile implements Adapter.
func (a *ConfigurationPolicyAdapter) Reconcile(ctx context.Context, cp *unstructured.Unstructured, g *Governed) (reconcile.Result, error) {
	log := logf.FromContext(ctx)
	switch {
	case cp.GetDeletionTimestamp() != nil:
		a.guard.forget(cp.GetUID())
		return reconcile.Result{}, nil
	case fromPolicy(cp):
		return reconcile.Result{}, nil // decided through the cleanup-decisions ConfigMap
	case g.Held != nil:
		log.Info("configuration policy held: no prune decision", "name", cp.GetName(), "namespace", cp.GetNamespace(), "reason", g.Held.Error())
		return reconcile.Result{}, nil
	}

	var desired v1alpha1.PruneBehavior
	if g.Policy != nil {
		var err error
		if desired, err = policy.PruneBehavior(g.Policy, g.Activation, cp.Object); err != nil {
			a.Recorder.Eventf(cp, nil, corev1.EventTypeWarning, v1alpha1.EvaluationErrorReason, "Prune",
				"not stamped, the decision failed: %v", err)
			return reconcile.Result{}, nil
		}
		if g.Policy.Spec.DryRun {
			actual, _, _ := unstructured.NestedString(cp.Object, "spec", "pruneObjectBehavior")
			pending := desired != "" && string(desired) != actual
			if pending {
				a.Recorder.Eventf(cp, nil, corev1.EventTypeNormal, v1alpha1.DryRunReason, "Prune",
					"dry run: would set pruneObjectBehavior %s", desired)
			}
			a.Tally.set(dryRunMark, g.Policy.Name, tallyKey("ConfigurationPolicy", cp), pending)
			return reconcile.Result{}, nil
		}
	}
	stamped := cp.GetAnnotations()[PruneAnnotation] != ""
	actual, _, _ := unstructured.NestedString(cp.Object, "spec", "pruneObjectBehavior")
	name := ""
	if g.Policy != nil {
		name = g.Policy.Name
	}
	key := tallyKey("ConfigurationPolicy", cp)
	a.Tally.set(dryRunMark, name, key, false)
	switch {
	case desired == "" && !stamped:
		a.Tally.record(name, key, false, false)
		return reconcile.Result{}, nil // nothing to own, nothing owned
	case desired != "" && stamped && actual == string(desired):
		a.Tally.record(name, key, false, false)
		return reconcile.Result{}, nil // steady: no write
	}
	if !a.guard.mayApply(cp, string(desired), a.Recorder, "Prune", "spec.pruneObjectBehavior") {
		a.Tally.record(name, key, false, true)
		return reconcile.Result{}, nil
	}
	conflict, err := a.apply(ctx, cp, desired)
	a.Tally.record(name, key, conflict, false)
	a.Tally.touch(name)
	return reconcile.Result{}, err
}

// apply writes the behaviour with server-side apply, never forced; an
// empty behaviour gives up what the operator owned.
func (a *ConfigurationPolicyAdapter) apply(ctx context.Context, cp *unstructured.Unstructured, b v1alpha1.PruneBehavior) (conflict bool, err error) {
	// The UID makes the apply a precondition: it never creates an object
	// that was deleted meanwhile.
	md := map[string]any{"name": cp.GetName(), "namespace": cp.GetNamespace(), "uid": string(cp.GetUID())}
	obj := map[string]any{
		"apiVersion": configurationPolicyGVK.GroupVersion().String(),
		"kind":       configurationPolicyGVK.Kind,
		"metadata":   md,
	}
	if b != "" {
		md["annotations"] = map[string]any{PruneAnnotation: string(b)}
		obj["spec"] = map[string]any{"pruneObjectBehavior": string(b)}
	}
	err = a.Client.Patch(ctx, &unstructured.Unstructured{Object: obj}, client.Apply, client.FieldOwner(v1alpha1.FieldManager))
	switch {
	case apierrors.IsConflict(err):
		a.Recorder.Eventf(cp, nil, corev1.EventTypeWarning, "Conflict", "Prune",
			"left alone: another manager owns spec.pruneObjectBehavior, the operator would set %s: %v", b, err)
		return true, nil
	case err != nil:
		return false, client.IgnoreNotFound(err)
	}
	stampedObjects.WithLabelValues("ConfigurationPolicy", cmp.Or(string(b), "Released")).Inc()
	if policy.Ineffective(b, cp.Object) {
		a.Recorder.Eventf(cp, nil, corev1.EventTypeWarning, "Ineffective", "Prune",
			"pruneObjectBehavior %s has no effect while remediationAction is inform: pruning needs enforce", b)
	}
	return false, nil
}

// fromPolicy reports whether an OCM Policy owns the ConfigurationPolicy.
func fromPolicy(cp *unstructured.Unstructured) bool {
	for _, ref := range cp.GetOwnerReferences() {
		gv, _ := schema.ParseGroupVersion(ref.APIVersion)
		if gv.Group == policyGVK.Group && ref.Kind == policyGVK.Kind {
			return true
		}
	}
	return false
}

// Watches implements Adapter: like works, ConfigurationPolicies are
// reconciled on spec, label and annotation changes, their cluster's changes
// and their policy's.
func (a *ConfigurationPolicyAdapter) Watches(b *builder.Builder) *builder.Builder {
	return b.
		WithEventFilter(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{},
			policyOrClusterEvents{})).
		Watches(newManagedCluster(), handler.EnqueueRequestsFromMapFunc(a.inNamespaceOf),
			builder.WithPredicates(predicate.Or[client.Object](predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&v1alpha1.CleanupPolicy{}, handler.EnqueueRequestsFromMapFunc(a.ofPolicy),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
}

func (a *ConfigurationPolicyAdapter) inNamespaceOf(ctx context.Context, mc client.Object) []reconcile.Request {
	return a.list(ctx, func(ns string) bool { return ns == mc.GetName() })
}

// ofPolicy maps a policy change to the ConfigurationPolicies it may decide
// for: those of the clusters it governs, and, when it selects every
// cluster, the standalone ones.
func (a *ConfigurationPolicyAdapter) ofPolicy(ctx context.Context, p client.Object) []reconcile.Request {
	clusters := newManagedClusterList()
	if err := a.Client.List(ctx, clusters); err != nil {
		logf.FromContext(ctx).Error(err, "listing ManagedClusters")
		return nil
	}
	all := sets.New[string]()
	governed := sets.New[string]()
	for i := range clusters.Items {
		c := &clusters.Items[i]
		all.Insert(c.GetName())
		if c.GetAnnotations()[v1alpha1.GoverningPolicyAnnotation] == p.GetName() {
			governed.Insert(c.GetName())
		}
	}
	selectsAll := p.(*v1alpha1.CleanupPolicy).Spec.ClusterSelector == ""
	return a.list(ctx, func(ns string) bool { return governed.Has(ns) || (selectsAll && !all.Has(ns)) })
}

func (a *ConfigurationPolicyAdapter) list(ctx context.Context, keep func(namespace string) bool) []reconcile.Request {
	items, err := listAsMetadata(ctx, a.Client, configurationPolicyGVK)
	if err != nil {
		logf.FromContext(ctx).Error(err, "listing ConfigurationPolicies")
		return nil
	}
	var reqs []reconcile.Request
	for i := range items {
		if keep(items[i].Namespace) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: items[i].Namespace, Name: items[i].Name}})
		}
	}
	return reqs
}
