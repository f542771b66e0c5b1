package v1alpha1

// Names the operator puts on other objects. The finalizer, the namespace
// label and the condition are fixed by the API contract.
const (
	// ClusterCleanupFinalizer is on every governed ManagedCluster; the
	// operator removes it once the cluster's content is cleaned up.
	ClusterCleanupFinalizer = "cleanup.fleetops.dev/cluster-cleanup"
	// ClusterDeletingLabel marks, with value "true", the namespace of a
	// cluster being cleaned up; admission refuses new work there.
	ClusterDeletingLabel = "cleanup.fleetops.dev/cluster-deleting"
	// GoverningPolicyAnnotation names, on a ManagedCluster, the policy that
	// governs it. A cleanup in progress stays with that policy. The
	// namespace of a cluster marked GovernedNamespaceLabel carries it too.
	GoverningPolicyAnnotation = "cleanup.fleetops.dev/policy"
	// GovernedNamespaceLabel marks, with value "true", the namespace of a
	// cluster a policy governs (not in dry run): admission refuses OCM's
	// own cleanup the deletion of its add-ons and works there, which the
	// policy's teardown deletes in its order. Only the operator writes it.
	GovernedNamespaceLabel = "cleanup.fleetops.dev/governed"
	// SignalWorkLabel marks the deletion-signal ManifestWork.
	SignalWorkLabel = "cleanup.fleetops.dev/deletion-signal"
	// SpecHashAnnotation is the hash of the spec the operator last applied
	// to an object it owns, so that unchanged objects are not rewritten.
	SpecHashAnnotation = "cleanup.fleetops.dev/spec-hash"
	// FieldManager is the field manager of every write the operator makes.
	FieldManager = "cleanup-operator"
	// InUseFinalizer is on a CleanupPolicy that governs clusters. A policy
	// being deleted keeps it until every teardown it governs has ended, so
	// that a teardown finishes under the policy that started it.
	InUseFinalizer = "cleanup.fleetops.dev/in-use"
	// ManagedByLabel, with the value ManagedBy, marks the objects the
	// operator created and owns: the deletion-signal ManifestWorks and the
	// cleanup-decisions ConfigMaps. An object of the same name without it
	// is never changed or deleted.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of ManagedByLabel on the operator's objects.
	ManagedBy = "cleanup-operator"
	// OrphaningAnnotation records, on a ManifestWork, the deleteOption the
	// operator stamped ("Orphan" or "SelectivelyOrphan"); it is written in
	// the same apply, so the operator knows which works carry its decision.
	OrphaningAnnotation = "cleanup.fleetops.dev/orphaning"
	// PruneAnnotation records, on a standalone ConfigurationPolicy, the
	// pruneObjectBehavior the operator stamped; it is written in the same apply.
	PruneAnnotation = "cleanup.fleetops.dev/prune"
	// DecisionsConfigMap names the ConfigMaps of prune decisions the operator
	// publishes, in every namespace holding a root Policy with
	// ConfigurationPolicy templates, for OCM hub templates to read.
	DecisionsConfigMap = "cleanup-decisions"
	// DeletionProtectedLabel marks, with value "true", a ManagedCluster the
	// governing policy's spec.deletionProtection protects: admission refuses
	// to delete it unless the deletion is confirmed. The operator owns it.
	DeletionProtectedLabel = "cleanup.fleetops.dev/deletion-protected"
	// DeleteConfirmedAnnotation confirms, on a protected ManagedCluster, that
	// it may be deleted; its value must be the cluster's own name.
	DeleteConfirmedAnnotation = "cleanup.fleetops.dev/delete-confirmed"
	// DeleteConfirmedAtAnnotation is when the deletion was confirmed, in
	// RFC 3339; a confirmation counts for a limited time from then.
	DeleteConfirmedAtAnnotation = "cleanup.fleetops.dev/delete-confirmed-at"
	// DeleteConfirmationAcceptedAnnotation is written by the operator on a
	// protected ManagedCluster: the DeleteConfirmedAtAnnotation value of the
	// confirmation it found valid. Admission counts a confirmation only
	// while the two are equal; the operator removes it when the
	// confirmation expires. (Admission policies cannot read the clock.)
	DeleteConfirmationAcceptedAnnotation = "cleanup.fleetops.dev/delete-confirmation-accepted"
	// LeaderElectionID names the Lease the manager holds with --leader-elect.
	LeaderElectionID = "cleanup-operator.fleetops.dev"
)

// ContentDeleteSuccessCondition is on a governed ManagedCluster being
// deleted: False while its content is removed, True at the end.
const ContentDeleteSuccessCondition = "ContentDeleteSuccess"

// Reasons of ContentDeleteSuccess.
const (
	// OrphaningReason surfaces while the work agent has not yet applied the
	// orphaning deleteOption of the cluster's works (Orphan for every work
	// under Needless, else what the orphaning rules decide): deleting a work
	// before that would delete its resources.
	OrphaningReason = "Orphaning"
	// SignallingReason surfaces while the cluster namespace is labelled and
	// the deletion-signal work is deleted and awaited.
	SignallingReason = "Signalling"
	// WaitingForMonitoredResourcesReason surfaces while monitored resources
	// remain in the cluster namespace; nothing is deleted meanwhile.
	WaitingForMonitoredResourcesReason = "WaitingForMonitoredResources"
	// DeletingStageReason surfaces when the operator deletes a stage's objects.
	DeletingStageReason = "DeletingStage"
	// ResourcesRemainingReason surfaces while deleted objects of a stage
	// have not gone yet (their finalizers are still being processed).
	ResourcesRemainingReason = "ResourcesRemaining"
	// CleanupFailedReason surfaces when the cleanup cannot go on: the timeout
	// passed under Required, a policy does not compile or failed at run
	// time, or a write was refused. The message names what remains.
	CleanupFailedReason = "CleanupFailed"
	// DeletedOutOfOrderReason surfaces when add-ons or works of the cluster
	// are being deleted by someone other than the operator before the step
	// of the teardown that deletes them (OCM's own cleanup, when the
	// admission policy does not hold it). The teardown goes on as planned;
	// the message names the objects and what to check.
	DeletedOutOfOrderReason = "DeletedOutOfOrder"
	// CompletedReason surfaces when everything was removed as declared.
	CompletedReason = "Completed"
	// OrphanedReason surfaces when, under Needless, the hub side was removed
	// and everything on the managed cluster left in place.
	OrphanedReason = "Orphaned"
	// ForcedReason surfaces when the work agent's finalizer was removed from
	// some objects to clean the hub side (BestEffort, or Needless after the timeout).
	ForcedReason = "Forced"
	// OrphanNotConfirmedReason is the Event reason, on a ManagedCluster,
	// for works deleted with an orphaning deleteOption the work agent never
	// confirmed: the cluster was unavailable past the timeout, and the
	// strategy (BestEffort or Needless) went on.
	OrphanNotConfirmedReason = "OrphanNotConfirmed"
	// DryRunReason surfaces when the governing policy is in dry run: the
	// message is the plan; nothing is deleted and the finalizer stays.
	DryRunReason = "DryRun"
	// WaitingForHooksReason surfaces while pre-cleanup hook annotations
	// (PreCleanupHookPrefix) on a deleting ManagedCluster hold its cleanup:
	// nothing is written for the teardown but this condition, and nothing
	// is ever forced, whatever the strategy or timeout. The message names
	// every hook. The condition is Unknown: the cleanup has not started.
	WaitingForHooksReason = "WaitingForHooks"
	// ResumedReason surfaces on the first reconcile of a deleting
	// ManagedCluster after its paused annotation went or its policy's
	// suspend was turned off: the condition is Unknown, nothing else is
	// written in that reconcile, and the timeout counts from this
	// transition (the time spent paused or suspended does not count).
	ResumedReason = "Resumed"
)

// Guard rails on a ManagedCluster.
const (
	// PreCleanupHookPrefix begins the key of every pre-cleanup hook
	// annotation: while a deleting ManagedCluster carries one, its cleanup
	// waits before its first write. Removing the last one resumes it.
	PreCleanupHookPrefix = "pre-cleanup.hook.cleanup.fleetops.dev/"
	// PausedAnnotation, with value "true" on a ManagedCluster, stops every
	// write of the operator for that cluster, its works and its
	// ConfigurationPolicies, as spec.suspend does for a whole policy. Any
	// value but a false one ("false", "0") pauses: one the operator cannot
	// read ("yes", "") pauses too.
	PausedAnnotation = "cleanup.fleetops.dev/paused"
)

// RestoredAtAnnotation is when the operator's guard last put back one of
// its admission policies, bindings or flow-control objects (RFC 3339, in
// nanoseconds). A restore that only removes what someone added would
// otherwise leave no trace of its time in the object's managed fields, and
// a deletecollection waits until the admission policy and its binding have
// not been written for a while (each API server loads them from a watch).
const RestoredAtAnnotation = "cleanup.fleetops.dev/restored-at"

// OCM finalizers the operator knows.
const (
	// WorkAgentFinalizer is the work agent's finalizer on ManifestWorks.
	WorkAgentFinalizer = "cluster.open-cluster-management.io/manifest-work-cleanup"
	// OCMResourceCleanupFinalizer is put by OCM's own cleanup controller
	// (feature gate ResourceCleanup), which deletes a deleted cluster's
	// add-ons and works; the operator holds it on governed clusters and
	// never touches this finalizer.
	OCMResourceCleanupFinalizer = "cluster.open-cluster-management.io/resource-cleanup"
)

// Event reasons of deletion protection, on a ManagedCluster.
const (
	// ProtectedReason: the cluster was marked DeletionProtectedLabel, or its
	// mark was taken back (the message says which).
	ProtectedReason = "DeletionProtection"
	// ProtectionFailedReason: spec.deletionProtection failed at run time for
	// the cluster; it is marked protected until the expression succeeds.
	ProtectionFailedReason = "DeletionProtectionFailed"
	// DeleteConfirmedReason: the operator accepted a deletion confirmation,
	// or took back one that expired (the message says which).
	DeleteConfirmedReason = "DeleteConfirmation"
	// ConfirmationRefusedReason: a deletion confirmation on the cluster does
	// not count (another cluster's name, no valid time, or too old).
	ConfirmationRefusedReason = "DeleteConfirmationRefused"
)
