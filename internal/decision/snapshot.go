package decision

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
)

// Snapshot is everything a teardown decision reads, gathered by one reader
// (internal/snapshot) for the operator and for the preview alike. It is
// data only: Plan makes no call but ResourceOf.
type Snapshot struct {
	// Cluster is the ManagedCluster, whole.
	Cluster *unstructured.Unstructured
	// Namespace is the cluster namespace, whole, as keepNamespace reads
	// it; nil when there is none.
	Namespace *corev1.Namespace
	// Objects are the objects, as metadata, of every monitored and stage
	// resource of the policy, and of ManifestWorks, in the cluster namespace.
	Objects map[schema.GroupVersionResource][]Object
	// Works are the cluster's ManifestWorks whole, by UID: their manifests
	// and status decide their orphaning.
	Works map[types.UID]*workv1.ManifestWork
	// ManifestsUnread are the works whose manifests a policy's orphaning
	// rules read, and that the reader could not give them (the operator's
	// cache keeps only their identity, and the API server holds another
	// generation): their orphaning waits, held, for the cache to catch up.
	ManifestsUnread map[types.UID]error
	// SignalOwned says whether the work named like the policy's deletion
	// signal work, when there is one, is the operator's own.
	SignalOwned bool
	// Unserved are the policy's resources the API server does not serve.
	Unserved map[schema.GroupVersionResource]bool
	// ClusterScoped are the policy's resources the API server serves
	// cluster-scoped: none of their objects is in the cluster namespace.
	// They are not listed; a step naming one holds, unless it is a stage
	// declared clusterScoped.
	ClusterScoped map[schema.GroupVersionResource]bool
	// Namespaced are the resources of stages declared clusterScoped that
	// the API server serves namespaced: not listed, the stage holds.
	Namespaced map[schema.GroupVersionResource]bool
	// Outside are the objects, as metadata, of the stages outside the
	// cluster namespace, at each of their places (Stage.Places).
	Outside map[Place][]Object
	// Lease is the cluster's Lease (ClusterLeaseName), read when its
	// Available condition is not True; nil when it was not read or there
	// is none.
	Lease *coordinationv1.Lease
	// Now is the time of the decision.
	Now time.Time
	// ResourceOf names the resource of a kind (the API server's REST
	// mapping), for orphaning rules.
	ResourceOf func(schema.GroupVersionKind) (string, error)
	// Fleet is what the policy's blast radius reads of the hub; nil when
	// no budget applies (the teardown is not held by one).
	Fleet *Fleet
	// Memory is what the executor did that the cache may not show yet;
	// empty for the preview.
	Memory Memory
	// NamespaceDeny are the namespaces never deleted (NamespaceKept);
	// nil: DefaultNamespaceDeny.
	NamespaceDeny []string
}

// Memory is what the operator's executor remembers of its own writes, so
// that a cache that has not caught up yet does not cause the same write
// twice. It is lost on restart, which costs at most one idempotent request.
type Memory struct {
	// Stamped are the generations this process gave a work's deleteOption.
	Stamped map[types.UID]int64
	// Restamps count the stamps of a work beyond the first: another
	// manager reverted them.
	Restamps map[types.UID]int
	// Deleted and Forced are the objects this process deleted, or whose
	// work-agent finalizer it removed.
	Deleted map[types.UID]bool
	Forced  map[types.UID]bool
	// Resumed says this process saw the cluster paused, or its policy
	// suspended, and this is the first teardown reconcile since: the
	// plan's only step reports the resume, so that the timeout counts
	// from it. False after a restart across the resume itself.
	Resumed bool
}

// ClusterCondition is the ManagedCluster's status condition of the type, as
// ClusterConditions then meta.FindStatusCondition find it (the first of
// the type that decodes), nil when it has none. It decodes that one only:
// a blast radius reads the condition of every deleting cluster of the
// policy for each teardown's plan.
func ClusterCondition(mc *unstructured.Unstructured, condType string) *metav1.Condition {
	if mc == nil {
		return nil
	}
	raw, _, _ := unstructured.NestedFieldNoCopy(mc.Object, "status", "conditions")
	list, _ := raw.([]any)
	for _, r := range list {
		m, ok := r.(map[string]any)
		if !ok || m["type"] != condType {
			continue
		}
		var c metav1.Condition
		if runtimeConverter.FromUnstructured(m, &c) == nil {
			return &c
		}
	}
	return nil
}

// ClusterConditions reads a ManagedCluster's status conditions.
func ClusterConditions(mc *unstructured.Unstructured) []metav1.Condition {
	if mc == nil {
		return nil
	}
	raw, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	out := make([]metav1.Condition, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtimeConverter.FromUnstructured(m, &c) == nil {
			out = append(out, c)
		}
	}
	return out
}

// NamespaceValue is the namespace as keepNamespace reads it: whole, with
// its kind.
func NamespaceValue(ns *corev1.Namespace) (map[string]any, error) {
	value, err := runtimeConverter.ToUnstructured(ns)
	if err != nil {
		return nil, err
	}
	value["apiVersion"], value["kind"] = "v1", "Namespace"
	return value, nil
}
