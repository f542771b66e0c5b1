package snapshot

import (
	"context"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// Lister lists the objects of a resource in a namespace, as metadata, and
// says whether the API server serves the resource: one not served has no
// objects, and the teardown holds on it. The operator lists from its cache
// (watching a resource the first time), the preview from the API server.
type Lister interface {
	List(ctx context.Context, gvr schema.GroupVersionResource, namespace string) (items []metav1.PartialObjectMetadata, served bool, err error)
}

// DeleteChecker is a Lister that also says whether its reader may delete a
// resource in a namespace ("" : cluster-scoped): a stage outside the
// cluster namespace is read only where the operator may delete, else the
// read fails with the checker's error and the teardown holds.
type DeleteChecker interface {
	MayDelete(ctx context.Context, gvr schema.GroupVersionResource, namespace string) error
}

// Reader reads, through the operator's cache or a live client, what the
// decisions take: the governing policy of a cluster (Govern), and a deleted
// cluster's teardown inputs (Read).
type Reader struct {
	// Client reads policies, clusters, namespaces and works whole: the
	// operator's cache, or the API server.
	Client client.Reader
	// Cache holds the compiled policies, one compilation per generation.
	Cache *cel.Cache
	// Governance remembers the selectors' results.
	Governance *decision.Governance
	// Lister lists monitored and stage resources; nil: MapperLister over
	// Client and Mapper.
	Lister Lister
	// Mapper names the resources of kinds, for orphaning rules.
	Mapper meta.RESTMapper
	// APIReader reads from the API server what the cache drops (the
	// manifests of works, see CompactManifests) and the cluster's Lease.
	APIReader client.Reader
	// CompactManifests says that Client keeps only the identity of each
	// manifest of a ManifestWork (CompactManifest), as the operator's cache
	// does: when the policy's orphaning rules read more
	// (cel.Policy.ReadsManifests), the manifests are read through
	// APIReader.
	CompactManifests bool
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// NamespaceDeny are the namespaces a teardown never deletes
	// (decision.NamespaceKept); nil: decision.DefaultNamespaceDeny.
	NamespaceDeny []string
	// BlastRadius is the operator-wide budget, where a policy sets none.
	BlastRadius v1alpha1.BlastRadius
	// RecordsNamespace is where teardown records are kept: the blast
	// radius counts the teardowns they say began. Empty: none are read.
	RecordsNamespace string
	// Records reads the records' metadata; nil: Client. The operator
	// reads them from its cache of its own ConfigMaps.
	Records client.Reader
	// Leases says whether to read the Lease of a deleting cluster whose
	// Available condition is not True (decision.Snapshot.Lease), through
	// APIReader: the operator and the preview do; a saved snapshot holds
	// none.
	Leases bool
}

// Read reads the cluster governed by g: its namespace whole, the works
// whole, the objects of every monitored and stage resource of the policy,
// and whether the signal work is the operator's. mem is what the caller
// remembers of its own writes (empty for the preview). A held or
// ungoverned cluster's snapshot holds only the cluster and its namespace.
func (r *Reader) Read(ctx context.Context, g *decision.Governed, mem decision.Memory) (*decision.Snapshot, error) {
	s := &decision.Snapshot{Cluster: g.Cluster, Now: time.Now(), Memory: mem, ResourceOf: r.resourceOf,
		Objects: map[schema.GroupVersionResource][]decision.Object{}, Works: map[types.UID]*workv1.ManifestWork{},
		Unserved: map[schema.GroupVersionResource]bool{}, ClusterScoped: map[schema.GroupVersionResource]bool{},
		NamespaceDeny: r.NamespaceDeny,
		Namespaced:    map[schema.GroupVersionResource]bool{}, Outside: map[decision.Place][]decision.Object{}}
	if r.Now != nil {
		s.Now = r.Now()
	}
	if g.Held != nil || g.Cluster == nil {
		return s, nil
	}
	if g.Policy != nil {
		// The blast radius holds a teardown, the namespace or not.
		if err := r.readFleet(ctx, s, g.Policy); err != nil {
			return nil, err
		}
	}
	if err := r.readLease(ctx, s); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: g.Cluster.GetName()}, ns); {
	case apierrors.IsNotFound(err):
		return s, nil
	case err != nil:
		return nil, err
	}
	s.Namespace = ns
	if g.Policy == nil {
		return s, nil
	}
	if err := r.readWorks(ctx, s, g.Policy, ns.Name); err != nil {
		return nil, err
	}
	lister := r.Lister
	if lister == nil {
		lister = MapperLister{Reader: r.Client, Mapper: r.Mapper}
	}
	if err := r.readNamespace(ctx, s, lister, g.Policy, ns.Name); err != nil {
		return nil, err
	}
	if err := r.readOutside(ctx, s, lister, decision.Places(g.Policy)); err != nil {
		return nil, err
	}
	s.SignalOwned = signalOwned(s, decision.SignalWorkName(g.Policy))
	return s, nil
}

// readNamespace lists, in the cluster namespace, the objects of every
// resource the policy's stages and monitored resources name, but the
// works, which readWorks read whole. A resource the API server does not
// serve is marked, so its step holds rather than finding nothing to wait
// for.
func (r *Reader) readNamespace(ctx context.Context, s *decision.Snapshot, lister Lister, policy *cel.Policy, namespace string) error {
	for _, gvr := range decision.Resources(policy) {
		if _, done := s.Objects[gvr]; done {
			continue
		}
		// A cluster-scoped resource has no objects in the cluster
		// namespace: never listed (a live list would return every object
		// of the hub, the cache none), its step holds.
		if r.Mapper != nil {
			scope, err := ScopeOf(r.Mapper, gvr)
			if err != nil {
				return err
			}
			if scope == decision.ClusterScoped {
				s.ClusterScoped[gvr] = true
				continue
			}
		}
		items, served, err := lister.List(ctx, gvr, namespace)
		if err != nil {
			return err
		}
		if !served {
			s.Unserved[gvr] = true
		}
		s.Objects[gvr] = Objects(gvr, items)
	}
	return nil
}

// readOutside lists the places of the stages outside the cluster
// namespace. A resource served in another scope than the stage declares is
// not listed (its stage holds); nor is one the lister says its reader may
// not delete there.
func (r *Reader) readOutside(ctx context.Context, s *decision.Snapshot, lister Lister, places []decision.Place) error {
	for _, pl := range places {
		if r.Mapper != nil {
			scope, err := ScopeOf(r.Mapper, pl.GVR)
			if err != nil {
				return err
			}
			switch {
			case scope == decision.ClusterScoped && pl.Namespace != "":
				s.ClusterScoped[pl.GVR] = true
				continue
			case scope == decision.Namespaced && pl.Namespace == "":
				s.Namespaced[pl.GVR] = true
				continue
			}
		}
		if checker, ok := lister.(DeleteChecker); ok {
			if err := checker.MayDelete(ctx, pl.GVR, pl.Namespace); err != nil {
				return err
			}
		}
		items, served, err := lister.List(ctx, pl.GVR, pl.Namespace)
		if err != nil {
			return err
		}
		if !served {
			s.Unserved[pl.GVR] = true
		}
		objs := Objects(pl.GVR, items)
		for i := range objs {
			objs[i].Outside = true
		}
		s.Outside[pl] = objs
	}
	return nil
}

// readWorks lists the works whole, once: their metadata for the stages,
// their manifests and status for their orphaning (the manifests from the
// API server when the cache keeps their identity only and the policy's
// rules read more). They are the cache's own, not copies: neither the
// snapshot nor a plan changes a work (ListWithManifests replaces a work
// whole); docs/developer/testing.md says how to run the controller suite
// under client-go's cache mutation detector.
func (r *Reader) readWorks(ctx context.Context, s *decision.Snapshot, policy *cel.Policy, namespace string) error {
	var works workv1.ManifestWorkList
	if err := r.Client.List(ctx, &works, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing ManifestWorks: %w", err)
	}
	if r.CompactManifests && policy.ReadsManifests() {
		var err error
		if s.ManifestsUnread, err = ListWithManifests(ctx, r.APIReader, namespace, works.Items); err != nil {
			return err
		}
	}
	metas := make([]metav1.PartialObjectMetadata, len(works.Items))
	for i := range works.Items {
		s.Works[works.Items[i].UID] = &works.Items[i]
		metas[i].SetGroupVersionKind(workv1.GroupVersion.WithKind("ManifestWork"))
		metas[i].ObjectMeta = works.Items[i].ObjectMeta
	}
	s.Objects[decision.ManifestWorks] = Objects(decision.ManifestWorks, metas)
	return nil
}

// signalOwned says whether the work named like the deletion-signal work,
// if any, is the operator's (its managed-by label).
func signalOwned(s *decision.Snapshot, name string) bool {
	works := s.Objects[decision.ManifestWorks]
	i := slices.IndexFunc(works, func(o decision.Object) bool { return name != "" && o.Meta.Name == name })
	return i >= 0 && decision.ManagedByOperator(works[i].Meta)
}

func (r *Reader) resourceOf(gvk schema.GroupVersionKind) (string, error) {
	if r.Mapper == nil {
		return "", fmt.Errorf("no REST mapping for %s", gvk)
	}
	mapping, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return "", err
	}
	return mapping.Resource.Resource, nil
}

// Objects is what the decisions see of listed objects: their metadata,
// which becomes CEL's `object` only where a filter reads it.
func Objects(gvr schema.GroupVersionResource, items []metav1.PartialObjectMetadata) []decision.Object {
	objs := make([]decision.Object, 0, len(items))
	for i := range items {
		objs = append(objs, decision.Object{GVR: gvr, Meta: &items[i]})
	}
	return objs
}

// readLease reads, from the API server, the Lease the cluster's agent
// renews, when its Available condition is not True: a condition anyone
// who may write the cluster's status can set is not believed while the
// agent still renews (decision.Snapshot.Available). None, or one the
// reader may not read, leaves the condition to decide.
func (r *Reader) readLease(ctx context.Context, s *decision.Snapshot) error {
	if !r.Leases || s.Cluster.GetDeletionTimestamp() == nil ||
		meta.IsStatusConditionTrue(decision.ClusterConditions(s.Cluster), clusterv1.ManagedClusterConditionAvailable) {
		return nil
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	lease := &coordinationv1.Lease{}
	switch err := reader.Get(ctx, client.ObjectKey{Namespace: s.Cluster.GetName(), Name: decision.ClusterLeaseName}, lease); {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err), meta.IsNoMatchError(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading the Lease %s of the cluster: %w", decision.ClusterLeaseName, err)
	}
	s.Lease = lease
	return nil
}
