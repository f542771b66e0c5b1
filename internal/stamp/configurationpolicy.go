package stamp

import (
	"context"

	"github.com/fleetops-dev/cleanup-operator/internal/metrics"
	"github.com/fleetops-dev/cleanup-operator/internal/tally"
	"github.com/fleetops-dev/cleanup-operator/internal/watch"

	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// +kubebuilder:rbac:groups=policy.open-cluster-management.io,resources=configurationpolicies,verbs=get;list;watch;patch

var (
	ConfigurationPolicyGVK = schema.GroupVersionKind{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "ConfigurationPolicy"}
	policyGVK              = schema.GroupVersionKind{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "Policy"}
)

// ConfigurationPolicyAdapter stamps spec.pruneObjectBehavior on the
// ConfigurationPolicies no OCM Policy owns. Those that come from an OCM
// Policy are never written (the policy framework would revert them): their
// decision is published in the cleanup-decisions ConfigMap.
type ConfigurationPolicyAdapter struct {
	stamper
}

// NewConfigurationPolicyAdapter returns the adapter.
// apiReader reads a ConfigurationPolicy from the API server, managedFields
// included, when an apply conflicts.
func NewConfigurationPolicyAdapter(c client.Client, apiReader client.Reader, recorder events.EventRecorder, tally *tally.Tally, metrics *metrics.Metrics) *ConfigurationPolicyAdapter {
	return &ConfigurationPolicyAdapter{stamper: stamper{Client: c, APIReader: apiReader, Recorder: recorder, Tally: tally, Metrics: metrics}}
}

var (
	_ Adapter[*unstructured.Unstructured] = &ConfigurationPolicyAdapter{}
	_ StandaloneAdapter                   = &ConfigurationPolicyAdapter{}
)

// Name implements Adapter.
func (a *ConfigurationPolicyAdapter) Name() string { return "configurationpolicy" }

// New implements Adapter.
func (a *ConfigurationPolicyAdapter) New() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ConfigurationPolicyGVK)
	return u
}

// ClusterName implements Adapter: a ConfigurationPolicy's cluster is its namespace.
func (a *ConfigurationPolicyAdapter) ClusterName(cp *unstructured.Unstructured) string {
	return cp.GetNamespace()
}

// Forget implements ForgetAdapter.
func (a *ConfigurationPolicyAdapter) Forget(cp client.Object) { a.forget(cp, "ConfigurationPolicy") }

// Standalone implements StandaloneAdapter: a ConfigurationPolicy whose
// namespace names no ManagedCluster (one of the standalone policy
// controller) is governed by the highest-priority policy with no
// clusterSelector, with `cluster` null.
func (a *ConfigurationPolicyAdapter) Standalone() bool { return true }

// Reconcile implements Adapter. A ConfigurationPolicy from an OCM Policy
// is decided through the cleanup-decisions ConfigMap, never written.
func (a *ConfigurationPolicyAdapter) Reconcile(ctx context.Context, cp *unstructured.Unstructured, g *decision.Governed) (reconcile.Result, error) {
	var desired v1alpha1.PruneBehavior
	wrote, err := a.reconcileStamp(ctx, cp, g, fromPolicy(cp), "ConfigurationPolicy", "Prune", func() (stampDecision, error) {
		if g.Policy != nil {
			var err error
			if desired, err = decision.PruneBehavior(g.Policy, g.Activation, cp.Object); err != nil {
				return stampDecision{}, err
			}
		}
		actual, _, _ := unstructured.NestedString(cp.Object, "spec", "pruneObjectBehavior")
		return stampDecision{current: actual == string(desired), pending: desired != "" && string(desired) != actual,
			stamp: stamp{gvk: ConfigurationPolicyGVK, kind: "ConfigurationPolicy", action: "Prune", field: "spec.pruneObjectBehavior",
				annotation: v1alpha1.PruneAnnotation, value: string(desired), spec: func() map[string]any { return map[string]any{"pruneObjectBehavior": string(desired)} },
				describe: string(desired), defaulted: []string{"spec", "pruneObjectBehavior"}}}, nil
	})
	if wrote && decision.Ineffective(desired, cp.Object) {
		a.Recorder.Eventf(cp, nil, corev1.EventTypeWarning, "Ineffective", "Prune",
			"pruneObjectBehavior %s has no effect while remediationAction is inform: pruning needs enforce", desired)
	}
	return reconcile.Result{}, err
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
	return stampWatches(b, a.inNamespaceOf, a.ofPolicy)
}

func (a *ConfigurationPolicyAdapter) inNamespaceOf(ctx context.Context, mc client.Object) []reconcile.Request {
	return a.list(ctx, func(ns string) bool { return ns == mc.GetName() })
}

// ofPolicy maps a policy change to the ConfigurationPolicies it may decide
// for: those of the clusters it governs, and, when it has no
// clusterSelector, those in namespaces that name no cluster.
func (a *ConfigurationPolicyAdapter) ofPolicy(ctx context.Context, p client.Object) []reconcile.Request {
	governed, err := clustersOf(ctx, a.Client, p.GetName())
	if err != nil {
		logf.FromContext(ctx).Error(err, "listing the clusters of a policy", "policy", p.GetName())
		return nil
	}
	var selectsAll bool
	if u, ok := p.(*unstructured.Unstructured); ok {
		selector, _, _ := unstructured.NestedString(u.Object, "spec", "clusterSelector")
		selectsAll = selector == ""
	}
	all := sets.New[string]()
	if selectsAll {
		clusters := snapshot.NewManagedClusterList()
		if err := a.Client.List(ctx, clusters, client.UnsafeDisableDeepCopy); err != nil { // names only: not copied
			logf.FromContext(ctx).Error(err, "listing ManagedClusters")
			return nil
		}
		for i := range clusters.Items {
			all.Insert(clusters.Items[i].GetName())
		}
	}
	return a.list(ctx, func(ns string) bool { return governed.Has(ns) || (selectsAll && !all.Has(ns)) })
}

func (a *ConfigurationPolicyAdapter) list(ctx context.Context, keep func(namespace string) bool) []reconcile.Request {
	if ctx.Err() != nil {
		return nil // the controller stopped: the kind may no longer be served
	}
	items, err := watch.ListAsMetadata(ctx, a.Client, ConfigurationPolicyGVK)
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
