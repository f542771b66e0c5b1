package v1alpha1

// Annotations the teardown of a deleted ManagedCluster writes. They are
// written before what they record happens, so that a restart finds them.
const (
	// ForcedObjectsAnnotation counts, on a ManagedCluster being cleaned up,
	// the objects whose work-agent finalizer the operator removed; it
	// survives a restart so that the cleanup ends with reason Forced.
	ForcedObjectsAnnotation = "cleanup.fleetops.dev/forced-objects"
	// ForcingAnnotation lists, on a ManagedCluster being cleaned up, the
	// objects of the last batch the operator set out to force
	// (resource/name), already counted in ForcedObjectsAnnotation.
	ForcingAnnotation = "cleanup.fleetops.dev/forcing"
	// UnconfirmedOrphansAnnotation lists, on a ManagedCluster being cleaned
	// up, the ManifestWorks deleted with an orphaning deleteOption that the
	// work agent never confirmed (the cluster was unavailable past the
	// timeout). It is written before those works are deleted.
	UnconfirmedOrphansAnnotation = "cleanup.fleetops.dev/unconfirmed-orphans"
)

// Event reasons of the teardown, besides the ContentDeleteSuccess reasons.
const (
	// DeletingNamespaceReason was the Event of the cluster namespace's
	// delete; none is emitted now (the teardown record lists the delete),
	// and the name is kept for those who filter Events by it.
	DeletingNamespaceReason = "DeletingNamespace"
	// ReleasedReason: no policy governs the cluster any more; the operator
	// took its marks back and left the content as it is.
	ReleasedReason = "Released"
	// GovernedReason: a policy governs the cluster; the finalizer is on.
	GovernedReason = "Governed"
	// NotOwnedReason: an object named like one of the operator's was not
	// created by it; it is neither changed nor deleted.
	NotOwnedReason = "NotOwned"
)
