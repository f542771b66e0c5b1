package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CleanupPolicyStatus is what the operator observed when it last reconciled the policy.
type CleanupPolicyStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is always present; Reconciling and Stalled only while
	// true; Guarded says whether the operator puts back its admission and
	// flow-control objects when they are deleted or changed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// matchedClusters counts the ManagedClusters whose clusterSelector is true.
	// +optional
	MatchedClusters int32 `json:"matchedClusters"`

	// governedClusters counts the matched clusters this policy governs, that
	// is where no other policy wins on priority or name.
	// +optional
	GovernedClusters int32 `json:"governedClusters"`

	// clustersDeleting counts the governed clusters whose content is being removed.
	// +optional
	ClustersDeleting int32 `json:"clustersDeleting,omitempty"`

	// clustersHeld counts the governed teardowns held on something only a
	// person can clear: a Required timeout passed, or a hold on an error
	// (CleanupFailed), or the blast radius (BlastRadiusExceeded). While any
	// is, the policy is Stalled, naming the reasons and clusters.
	// +optional
	ClustersHeld int32 `json:"clustersHeld,omitempty"`

	// worksStamped counts the ManifestWorks of governed clusters that carry
	// this policy's orphaning decision.
	// +optional
	WorksStamped int32 `json:"worksStamped,omitempty"`

	// policiesStamped counts the ConfigurationPolicies that carry this
	// policy's prune decision.
	// +optional
	PoliciesStamped int32 `json:"policiesStamped,omitempty"`

	// conflicts counts the objects whose field another manager owns with
	// another value: the operator left them alone (see their Events).
	// +optional
	Conflicts int32 `json:"conflicts,omitempty"`

	// contested counts the objects another controller kept reverting: the
	// operator stopped writing them (see their Events).
	// +optional
	Contested int32 `json:"contested,omitempty"`

	// writeFailed counts the objects whose last write of this policy's
	// decision the API server refused (an admission policy or webhook,
	// most often): the operator tries again (see their WriteFailed Events).
	// +optional
	WriteFailed int32 `json:"writeFailed,omitempty"`

	// templatesNotReadingDecisions counts the ConfigurationPolicy templates
	// of root Policies placed on governed clusters that do not read their
	// pruneObjectBehavior from the cleanup-decisions ConfigMap (see the
	// Events on the root Policies for the line to put in Git).
	// +optional
	TemplatesNotReadingDecisions int32 `json:"templatesNotReadingDecisions,omitempty"`

	// dryRunPending counts, in dry run, the objects whose decision differs
	// from what they carry: what would be written once dryRun is off.
	// +optional
	DryRunPending int32 `json:"dryRunPending,omitempty"`

	// notOwned counts the objects the operator would write but did not
	// create: a ManifestWork named like the deletion-signal work, or a
	// cleanup-decisions ConfigMap, without the label
	// app.kubernetes.io/managed-by: cleanup-operator. They are neither
	// changed nor deleted, and the step that needs them holds; the Ready
	// message and the Events name them.
	// +optional
	NotOwned int32 `json:"notOwned,omitempty"`

	// evaluationErrors counts the clusters for which an expression failed at
	// run time; those clusters are held, not governed by a guess.
	// +optional
	EvaluationErrors int32 `json:"evaluationErrors,omitempty"`

	// overlaps lists the other policies that tie with this one on some of
	// the same clusters (the same priority, each with a clusterSelector or
	// neither); the name decides which governs them.
	// +optional
	// +listType=map
	// +listMapKey=policy
	// +kubebuilder:validation:MaxItems=16
	Overlaps []PolicyOverlap `json:"overlaps,omitempty"`
}

// PolicyOverlap is another policy selecting the same clusters at the same priority.
type PolicyOverlap struct {
	// policy is the other CleanupPolicy's name.
	// +required
	Policy string `json:"policy"`

	// clusters counts the clusters both policies select.
	// +required
	Clusters int32 `json:"clusters"`

	// governedBy is the policy that governs those clusters: of two that
	// tie, the lower name.
	// +required
	GovernedBy string `json:"governedBy"`

	// examples names up to three of the shared clusters.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=3
	Examples []string `json:"examples,omitempty"`
}
