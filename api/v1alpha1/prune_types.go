package v1alpha1

// PruneBehavior is the value stamped on ConfigurationPolicy spec.pruneObjectBehavior.
// +kubebuilder:validation:Enum=DeleteAll;DeleteIfCreated;None
type PruneBehavior string

const (
	// PruneDeleteAll deletes every object the ConfigurationPolicy references when it is deleted.
	PruneDeleteAll PruneBehavior = "DeleteAll"
	// PruneDeleteIfCreated deletes only the objects the ConfigurationPolicy created.
	PruneDeleteIfCreated PruneBehavior = "DeleteIfCreated"
	// PruneNone leaves every object in place.
	PruneNone PruneBehavior = "None"
)

// PruneBehaviors lists the valid prune behaviours in the order of the enum.
var PruneBehaviors = []PruneBehavior{PruneDeleteAll, PruneDeleteIfCreated, PruneNone}

// Prune decides ConfigurationPolicy spec.pruneObjectBehavior.
type Prune struct {
	// default is the behaviour when no rule matches.
	// +optional
	// +kubebuilder:default=None
	Default PruneBehavior `json:"default,omitempty"`

	// rules are tried in order; the first whose `when` is true wins.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Rules []PruneRule `json:"rules,omitempty"`
}

// PruneRule selects a prune behaviour for the ConfigurationPolicies where `when` is true.
type PruneRule struct {
	// when is a CEL expression over `policy` (the ConfigurationPolicy),
	// `cluster` (null without a ManagedCluster) and `variables` that returns bool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	When string `json:"when"`

	// behavior applies when `when` is true.
	// +required
	Behavior PruneBehavior `json:"behavior"`
}
