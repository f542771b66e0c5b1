package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BlastRadius bounds a burst of teardowns: beyond maxTeardowns begun within
// window, the teardowns of the policy's clusters hold before their first
// write (reason BlastRadiusExceeded) until released; beyond maxConcurrent
// in progress at once, they wait their turn (reason WaitingForTurn).
type BlastRadius struct {
	// maxTeardowns is how many of the policy's clusters' teardowns may begin
	// within the window: a count ("5") or a share of the clusters the policy
	// governs ("10%", rounded down). Absent: no bound on teardowns begun.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="must be a count of 0 or more, or a percentage from 0% to 100%"
	MaxTeardowns *intstr.IntOrString `json:"maxTeardowns,omitempty"`

	// window is the time over which maxTeardowns counts the teardowns of the
	// policy's clusters, by their deletion: a positive duration such as 30m
	// or 1h. Defaults to 1h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) > duration('0s')",message="must be a positive duration such as 30m or 1h"
	Window *metav1.Duration `json:"window,omitempty"`

	// maxConcurrent is how many of the policy's clusters' teardowns may be
	// in progress at once; the others wait their turn, in the order of their
	// deletion. Absent: no bound.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxConcurrent *int32 `json:"maxConcurrent,omitempty"`

	// afterWindow says what a teardown held beyond maxTeardowns does once
	// the window passed with no new deletion of the policy's clusters: Hold
	// (the default) keeps it held until it is released (kubectl cleanup
	// release); Proceed lets it go on.
	// +optional
	AfterWindow AfterWindow `json:"afterWindow,omitempty"`
}

// AfterWindow says what a held teardown does once its window is quiet.
// +kubebuilder:validation:Enum=Hold;Proceed
type AfterWindow string

// What a held teardown does once the window passed with no new deletion.
const (
	AfterWindowHold    AfterWindow = "Hold"
	AfterWindowProceed AfterWindow = "Proceed"
)

// DefaultBlastRadiusWindow is the window of a budget that names none.
var DefaultBlastRadiusWindow = metav1.Duration{Duration: time.Hour}

const (
	// BlastRadiusExceededReason surfaces, on the ContentDeleteSuccess
	// condition (Unknown: the cleanup has not started), while the teardown
	// of a deleted cluster holds because more of its policy's clusters'
	// teardowns began within the window than spec.blastRadius.maxTeardowns
	// allows. Nothing is written for the teardown but this condition until
	// it is released. The message names the budget and the clusters counted.
	BlastRadiusExceededReason = "BlastRadiusExceeded"
	// WaitingForTurnReason surfaces, on the ContentDeleteSuccess condition
	// (Unknown), while spec.blastRadius.maxConcurrent teardowns of the
	// policy's clusters are in progress: this one begins when one ends.
	WaitingForTurnReason = "WaitingForTurn"
	// BlastRadiusReleasedAnnotation, on a ManagedCluster whose teardown
	// holds with BlastRadiusExceeded, releases it: "<count>/<time>", the
	// number of clusters the release named and when it was written (RFC
	// 3339). It counts only if written after the cluster's deletion and no
	// later than now; kubectl cleanup release writes it.
	BlastRadiusReleasedAnnotation = "cleanup.fleetops.dev/blast-radius-released"
)
