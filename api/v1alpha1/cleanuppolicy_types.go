package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Bounds on list sizes and expression lengths. They keep the API server's
// estimated cost of validating a CleanupPolicy bounded and give the CEL
// compiler a known worst case per policy.
const (
	// MaxExpressionLength is the longest CEL expression a field accepts.
	MaxExpressionLength = 4096
	// MaxRules is the longest list of rules, variables, stages or monitored resources.
	MaxRules = 32
)

// RemoveStrategyType says what happens to a cluster's content on the managed
// cluster when the ManagedCluster is deleted.
// +kubebuilder:validation:Enum=Needless;BestEffort;Required
type RemoveStrategyType string

const (
	// RemoveStrategyNeedless leaves everything on the managed cluster: every
	// ManifestWork is orphaned before the hub-side objects are deleted.
	RemoveStrategyNeedless RemoveStrategyType = "Needless"
	// RemoveStrategyBestEffort deletes and waits, and after the timeout (or at
	// once when the cluster is unavailable) forces the hub side clean.
	RemoveStrategyBestEffort RemoveStrategyType = "BestEffort"
	// RemoveStrategyRequired deletes and waits for every object to be gone; it never forces.
	RemoveStrategyRequired RemoveStrategyType = "Required"
)

// RemoveStrategyTypes lists the valid strategies in the order of the enum.
var RemoveStrategyTypes = []RemoveStrategyType{RemoveStrategyNeedless, RemoveStrategyBestEffort, RemoveStrategyRequired}

// CleanupPolicySpec declares, in CEL, which clusters the policy governs and
// what happens to their content when they, their ManifestWorks or their
// ConfigurationPolicies are deleted.
type CleanupPolicySpec struct {
	// clusterSelector is a CEL expression over `cluster` (the ManagedCluster)
	// that returns bool. Empty selects every ManagedCluster.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ClusterSelector string `json:"clusterSelector,omitempty"`

	// priority orders policies that select the same cluster: the highest wins;
	// of equal priority, a policy with a clusterSelector wins over a
	// catch-all, and ties break by name, lowest first. Defaults to 0.
	// +optional
	Priority int32 `json:"priority,omitempty"`

	// variables are named CEL values over `cluster` and earlier variables,
	// usable as `variables.<name>` in every later expression.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Variables []Variable `json:"variables,omitempty"`

	// removeStrategy decides what a cluster's deletion does to the content on
	// the managed cluster.
	// +required
	RemoveStrategy RemoveStrategy `json:"removeStrategy"`

	// monitoredResources are resources in the cluster namespace that other
	// controllers clean up: while any of them remains, nothing is deleted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	MonitoredResources []MonitoredResource `json:"monitoredResources,omitempty"`

	// deletionStages are deleted in order, each once the previous is empty.
	// Absent: ManagedClusterAddOns, then ManifestWorks.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	DeletionStages []DeletionStage `json:"deletionStages,omitempty"`

	// keepNamespace is a CEL expression over `namespace` (the cluster
	// namespace), `cluster` and `variables`; true keeps the namespace when the
	// cluster is deleted. Empty: the namespace is deleted.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	KeepNamespace string `json:"keepNamespace,omitempty"`

	// deletionSignal is the ManifestWork kept on every governed cluster and
	// deleted first when the cluster is deleted, so that in-cluster
	// controllers can clean up. Absent: no signal work; the cluster namespace
	// is still labelled.
	// +optional
	DeletionSignal *DeletionSignal `json:"deletionSignal,omitempty"`

	// orphaning rules decide, per manifest of a ManifestWork, whether the
	// resource stays on the managed cluster when the work is deleted.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Orphaning []OrphaningRule `json:"orphaning,omitempty"`

	// prune decides the pruneObjectBehavior of ConfigurationPolicies.
	// Absent: the operator does not write pruneObjectBehavior.
	// +optional
	Prune *Prune `json:"prune,omitempty"`

	// dryRun computes and reports every decision without changing anything.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// suspend, when true, stops the operator from writing anything for what
	// the policy governs: no stamp, no finalizer added or removed, no
	// teardown step, no condition or Event on its clusters. The policy's
	// status is written once, when suspend turns true (Ready, reason
	// Suspended), and not again until it is resumed. A cluster deleted
	// meanwhile waits under its finalizer. Absent or false: the policy is
	// reconciled, and resuming reconciles everything it governs.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// blastRadius bounds how many of the policy's clusters' teardowns may
	// begin within a window, and how many may run at once. Absent: the
	// operator's defaults (its --blast-radius-* and
	// --max-concurrent-teardowns flags), which bound nothing unless set.
	// +optional
	BlastRadius *BlastRadius `json:"blastRadius,omitempty"`

	// deletionProtection is a CEL expression over `cluster` and `variables`
	// that returns bool. Where it is true the operator labels the governed
	// ManagedCluster cleanup.fleetops.dev/deletion-protected=true, and
	// admission refuses to delete it until the deletion is confirmed with the
	// annotation cleanup.fleetops.dev/delete-confirmed set to the cluster's
	// own name (kubectl cleanup confirm-delete NAME). An expression that fails
	// for a cluster protects it. Empty: no cluster is protected.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	DeletionProtection string `json:"deletionProtection,omitempty"`
}

// Variable is a named CEL value.
type Variable struct {
	// name is how later expressions refer to the value: `variables.<name>`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][a-zA-Z0-9_]*$`
	Name string `json:"name"`

	// expression is a CEL expression over `cluster` and earlier variables.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
}

// RemoveStrategy picks the strategy for a cluster.
type RemoveStrategy struct {
	// default is the strategy when no rule matches.
	// +required
	Default RemoveStrategyType `json:"default"`

	// rules are tried in order; the first whose `when` is true wins.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Rules []StrategyRule `json:"rules,omitempty"`

	// timeout is how long a cluster's cleanup may take before Required reports
	// CleanupFailed and BestEffort and Needless force the hub side clean: a
	// positive duration of hours, minutes and seconds, such as 90s, 30m or
	// 1h30m. The API server refuses anything else (a word, a sign, zero).
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) > duration('0s')",message="must be a positive duration such as 90s, 30m or 1h30m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// StrategyRule selects a strategy for the clusters where `when` is true.
type StrategyRule struct {
	// when is a CEL expression over `cluster` and `variables` that returns bool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	When string `json:"when"`

	// strategy applies when `when` is true.
	// +required
	Strategy RemoveStrategyType `json:"strategy"`
}

// GroupVersionResource names a resource in a cluster namespace.
type GroupVersionResource struct {
	// group is the API group, a DNS subdomain such as
	// work.open-cluster-management.io; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$`
	Group string `json:"group,omitempty"`

	// version is the API version, such as v1 or v1beta1.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Version string `json:"version"`

	// resource is the plural resource name, in lower case, for example
	// manifestworks; not a kind, and no subresource.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Resource string `json:"resource"`
}

// MonitoredResource is a resource that must be gone from the cluster
// namespace before anything in it is deleted.
type MonitoredResource struct {
	GroupVersionResource `json:",inline"`

	// when is an optional CEL filter over `object` (the resource's metadata),
	// `cluster` and `variables`: only objects for which it is true hold the
	// cleanup. Empty: every object of the resource holds it.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	When string `json:"when,omitempty"`
}

// DeletionStage is one step of a cluster's cleanup.
// +kubebuilder:validation:XValidation:rule="!(has(self.namespaces) && size(self.namespaces) > 0 && has(self.clusterScoped) && self.clusterScoped)",message="a stage names namespaces or is clusterScoped, not both"
// +kubebuilder:validation:XValidation:rule="((!has(self.namespaces) || size(self.namespaces) == 0) && (!has(self.clusterScoped) || !self.clusterScoped)) || (has(self.when) && size(self.when) > 0)",message="a stage outside the cluster namespace (namespaces or clusterScoped) needs a when that selects the cluster's objects: without one it would delete every object of the resource there"
type DeletionStage struct {
	// name identifies the stage in conditions, events and metrics.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	GroupVersionResource `json:",inline"`

	// when is a CEL filter over `object` (the resource's metadata: apiVersion,
	// kind and metadata), `cluster` and `variables`: only objects for which
	// it is true belong to the stage. Empty: every object of the resource
	// not taken by an earlier stage. Required when the stage names
	// namespaces or is clusterScoped.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	When string `json:"when,omitempty"`

	// namespaces are the namespaces, other than the cluster namespace, where
	// the stage finds the cluster's objects of a namespaced resource (Argo CD
	// cluster Secrets in argocd, say), selected by when. Never every
	// namespace: each is named, and `*` is refused. Empty: the cluster
	// namespace.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule="self != '*'",message="every namespace is never a stage's: name each namespace"
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// clusterScoped, when true, says the stage's resource is cluster-scoped
	// (a ClusterRoleBinding named for the cluster, say), and its objects
	// that when selects are the cluster's.
	// +optional
	ClusterScoped bool `json:"clusterScoped,omitempty"`
}

// OutsideClusterNamespace says whether the stage finds its objects outside
// the cluster namespace: in listed namespaces or cluster-scoped.
func (s DeletionStage) OutsideClusterNamespace() bool {
	return len(s.Namespaces) > 0 || s.ClusterScoped
}

// DeletionSignal is the ManifestWork that tells the managed cluster it is being deleted.
type DeletionSignal struct {
	// workName is the name of the signal ManifestWork in each cluster namespace.
	// +optional
	// +kubebuilder:default=cleanup-signal
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	WorkName string `json:"workName,omitempty"`

	// manifests are the objects the signal work keeps on the managed cluster.
	// In-cluster controllers put finalizers on them to hold the cleanup until
	// they have cleaned up.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Manifests []Manifest `json:"manifests,omitempty"`
}

// Manifest is a whole Kubernetes object: the API server requires its
// apiVersion and kind, and this rule its name.
// +kubebuilder:validation:XValidation:rule="has(self.metadata) && has(self.metadata.name) && size(self.metadata.name) > 0",message="a manifest needs metadata.name"
type Manifest struct {
	// +kubebuilder:validation:EmbeddedResource
	// +kubebuilder:pruning:PreserveUnknownFields
	runtime.RawExtension `json:",inline"`
}

// OrphaningRule keeps the manifests for which `when` is true on the managed
// cluster when their ManifestWork is deleted.
type OrphaningRule struct {
	// name identifies the rule in status and events.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// when is a CEL expression over `manifest` (one entry of the work's
	// manifests), `work`, `cluster` and `variables` that returns bool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	When string `json:"when"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fcpol
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedClusters`
// +kubebuilder:printcolumn:name="Governed",type=integer,JSONPath=`.status.governedClusters`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// CleanupPolicy governs what happens to the content of ManagedClusters,
// ManifestWorks and ConfigurationPolicies when they are deleted.
type CleanupPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired behaviour.
	// +required
	Spec CleanupPolicySpec `json:"spec"`

	// status is what the operator observed.
	// +optional
	Status CleanupPolicyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// CleanupPolicyList contains a list of CleanupPolicy.
type CleanupPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CleanupPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CleanupPolicy{}, &CleanupPolicyList{})
}
