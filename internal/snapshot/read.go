package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
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

// readFleet reads, for a deleted cluster whose policy (or the operator)
// sets a blast radius, the policy's clusters: how many it governs and those
// being deleted under the operator's finalizer. A cluster belongs to the
// policy by its governing-policy annotation, which the operator writes with
// its finalizer: the same set for every replica and every restart. Only the
// clusters OCM accepted (spec.hubAcceptsClient, which OCM lets only those
// who may accept clusters set) count toward the base of a percentage, so
// that creating clusters does not raise a budget.
func (r *Reader) readFleet(ctx context.Context, s *decision.Snapshot, p *cel.Policy) error {
	if s.Cluster.GetDeletionTimestamp() == nil || p.Spec.BlastRadius == nil && !bounds(r.BlastRadius) {
		return nil
	}
	// The cache's own objects, read and never changed: every reconcile of
	// a deleted cluster under a budget reads the whole fleet.
	list := NewManagedClusterList()
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	f := &decision.Fleet{Default: r.BlastRadius}
	for i := range list.Items {
		mc := &list.Items[i]
		if !slices.Contains(mc.GetFinalizers(), v1alpha1.ClusterCleanupFinalizer) || decision.Pin(mc) != p.Name {
			continue
		}
		if accepted, _, _ := unstructured.NestedBool(mc.Object, "spec", "hubAcceptsClient"); accepted {
			f.Governed++
		}
		if mc.GetDeletionTimestamp() != nil {
			f.Deleting = append(f.Deleting, mc)
		}
	}
	// The cluster planned counts as read, even when the list is behind it.
	if i := slices.IndexFunc(f.Deleting, func(c *unstructured.Unstructured) bool { return c.GetUID() == s.Cluster.GetUID() }); i >= 0 {
		f.Deleting[i] = s.Cluster
	} else {
		f.Deleting = append(f.Deleting, s.Cluster)
	}
	if err := r.readBegun(ctx, s, p, f); err != nil {
		return err
	}
	s.Fleet = f
	return nil
}

// readBegun reads the teardowns begun under the policy from their records:
// they count after their clusters are gone, within the longest window a
// budget may name. A record also says that a cluster still being deleted
// began its teardown, however long ago it was deleted (a record's start is
// its cluster's deletion): those are read too.
func (r *Reader) readBegun(ctx context.Context, s *decision.Snapshot, p *cel.Policy, f *decision.Fleet) error {
	if r.RecordsNamespace == "" {
		return nil
	}
	b := decision.BudgetOf(p.Spec.BlastRadius, r.BlastRadius, f.Governed)
	since := s.Now.Add(-b.Window)
	for _, mc := range f.Deleting {
		if d := mc.GetDeletionTimestamp().Add(-time.Second); d.Before(since) {
			since = d
		}
	}
	records := r.Records
	if records == nil {
		records = r.Client
	}
	started, err := record.StartedUnder(ctx, records, r.RecordsNamespace, p.Name, since)
	if err != nil {
		return err
	}
	for _, st := range started {
		f.Begun = append(f.Begun, decision.Started{Cluster: st.Cluster, UID: st.UID, Start: st.Start})
	}
	return nil
}

// bounds says whether a budget bounds anything.
func bounds(b v1alpha1.BlastRadius) bool {
	return b.MaxTeardowns != nil || b.MaxConcurrent != nil
}

// MapperLister lists from a reader, through a REST mapper that says which
// resources the API server serves: the preview's Lister.
type MapperLister struct {
	Reader client.Reader
	Mapper meta.RESTMapper
}

// List implements Lister.
func (l MapperLister) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]metav1.PartialObjectMetadata, bool, error) {
	gvk, err := l.Mapper.KindFor(gvr)
	switch {
	case meta.IsNoMatchError(err):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("mapping %s: %w", gvr, err)
	}
	items, err := ListMetadata(ctx, l.Reader, gvk, namespace)
	return items, true, err
}

// ScopeOf says, through a REST mapper, how the API server serves a
// resource: not at all, cluster-scoped, or namespaced. The mapper asks the
// API server again for a group version it did not know, so a CRD installed
// later is found.
func ScopeOf(mapper meta.RESTMapper, gvr schema.GroupVersionResource) (decision.Scope, error) {
	gvk, err := mapper.KindFor(gvr)
	if err == nil {
		var m *meta.RESTMapping
		if m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			if m.Scope.Name() == meta.RESTScopeNameRoot {
				return decision.ClusterScoped, nil
			}
			return decision.Namespaced, nil
		}
	}
	if meta.IsNoMatchError(err) {
		return decision.NotServed, nil
	}
	return decision.NotServed, fmt.Errorf("mapping %s: %w", gvr, err)
}

// ListMetadata lists the metadata of a kind's objects in a namespace.
func ListMetadata(ctx context.Context, r client.Reader, gvk schema.GroupVersionKind, namespace string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", gvk.Kind, namespace, err)
	}
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(gvk)
	}
	return list.Items, nil
}

// Govern reads the named ManagedCluster and every CleanupPolicy, and
// resolves the policy that governs the cluster (decision.Resolve). When
// there is no ManagedCluster of that name, standalone says whether the
// standalone rule applies (an object in a namespace that names no cluster);
// otherwise nothing governs.
func (r *Reader) Govern(ctx context.Context, clusterName string, standalone bool) (*decision.Governed, error) {
	budget := cel.NewBudget(cel.ReconcileCostBudget)
	cluster := NewManagedCluster()
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: clusterName}, cluster); {
	case apierrors.IsNotFound(err):
		if !standalone {
			return &decision.Governed{Budget: budget}, nil
		}
		cluster = nil
	case err != nil:
		return nil, err
	}
	policies, err := CompileAll(ctx, r.Client, r.Cache)
	if err != nil {
		return nil, err
	}
	return r.Governance.Resolve(ctx, budget, policies.Input(cluster, standalone)), nil
}

// Check is what a reconcile that decides many objects under one resolution
// (Govern) checks before each: whether it still holds. It reads into the
// same two objects each time, rather than making two per object, and is
// for one goroutine. After a read they hold the cache's own content, which
// nothing writes to.
type Check struct {
	r               *Reader
	cluster, policy *unstructured.Unstructured
}

// Check returns a Check of r, for the objects of one reconcile.
func (r *Reader) Check() *Check {
	return &Check{r: r, cluster: NewManagedCluster(), policy: NewCleanupPolicy()}
}

// Current says whether g, resolved by Govern for the named cluster, still
// holds: the cache has the ManagedCluster at the resourceVersion g read (or
// still none), and the governing policy at the generation g compiled. A
// teardown begun, a pause or a policy's new generation meanwhile make the
// reconcile resolve again. A policy that newly outranks g's is not seen
// here; its event queues the objects again.
func (c *Check) Current(ctx context.Context, clusterName string, g *decision.Governed) (bool, error) {
	switch err := c.r.Client.Get(ctx, client.ObjectKey{Name: clusterName}, c.cluster, client.UnsafeDisableDeepCopy); {
	case apierrors.IsNotFound(err):
		if g.Cluster != nil {
			return false, nil
		}
	case err != nil:
		return false, err
	case g.Cluster == nil || c.cluster.GetResourceVersion() != g.Cluster.GetResourceVersion():
		return false, nil
	}
	if g.Policy == nil {
		return true, nil
	}
	if err := c.r.Client.Get(ctx, client.ObjectKey{Name: g.Policy.Name}, c.policy, client.UnsafeDisableDeepCopy); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return c.policy.GetUID() == g.Policy.UID && c.policy.GetGeneration() == g.Policy.Generation, nil
}

// ListPolicies lists every CleanupPolicy as stored, undecoded.
func ListPolicies(ctx context.Context, r client.Reader, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	list := newCleanupPolicyList()
	if err := r.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing CleanupPolicies: %w", err)
	}
	return list.Items, nil
}

// DecodePolicy decodes one stored CleanupPolicy; see cel.DecodePolicy.
func DecodePolicy(u *unstructured.Unstructured) (*v1alpha1.CleanupPolicy, field.ErrorList) {
	return cel.DecodePolicy(u.Object)
}

// Policies are every CleanupPolicy, compiled.
type Policies struct {
	// Ranked are the valid policies not being deleted, by precedence.
	Ranked []*cel.Policy
	// Invalid are the errors of the policies not being deleted that do not
	// compile or that are stored with a field the operator cannot decode.
	Invalid map[string]error
	// deleting are the policies being deleted, compiled or not: they govern
	// nothing new, only the teardowns they started, found by name.
	deleting map[string]compiled
	// suspended are the names of the policies stored with spec.suspend
	// true, read raw: valid or not, being deleted or not.
	suspended map[string]bool
}

type compiled struct {
	policy *cel.Policy
	err    error
}

// CompileAll compiles every CleanupPolicy, from the cache of compiled
// policies. The list is read without a copy: decoding copies what it keeps,
// once per generation.
func CompileAll(ctx context.Context, r client.Reader, cache *cel.Cache) (*Policies, error) {
	items, err := ListPolicies(ctx, r, client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, err
	}
	ps := &Policies{Invalid: map[string]error{}, deleting: map[string]compiled{}, suspended: map[string]bool{}}
	var valid []*cel.Policy
	for i := range items {
		u := &items[i]
		if suspend, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend"); suspend {
			ps.suspended[u.GetName()] = true
		}
		p, errs := cache.Load(u.GetUID(), u.GetGeneration(), func() (*v1alpha1.CleanupPolicy, field.ErrorList) {
			return DecodePolicy(u)
		})
		switch {
		case u.GetDeletionTimestamp() != nil:
			ps.deleting[u.GetName()] = compiled{policy: p, err: errs.ToAggregate()}
		case len(errs) > 0:
			ps.Invalid[u.GetName()] = errs.ToAggregate()
		default:
			valid = append(valid, p)
		}
	}
	ps.Ranked = decision.Ranked(valid)
	return ps, nil
}

// Input is what governance takes for cluster (nil: none of that name).
func (ps *Policies) Input(cluster *unstructured.Unstructured, standalone bool) decision.Input {
	in := decision.Input{Cluster: cluster, Standalone: standalone, Ranked: ps.Ranked, Invalid: ps.Invalid, Suspended: ps.Suspended()}
	if !decision.Pinned(cluster) {
		return in
	}
	name := decision.Pin(cluster)
	if c, ok := ps.deleting[name]; ok {
		in.Pinned, in.PinnedErr = c.policy, c.err
		return in
	}
	if err, ok := ps.Invalid[name]; ok {
		in.PinnedErr = err
		return in
	}
	for _, p := range ps.Ranked {
		if p.Name == name {
			in.Pinned = p
		}
	}
	return in
}

// Suspended are the names of the suspended policies: those stored with
// spec.suspend true (read raw, so a policy that does not decode counts),
// and the compiled ones that say so.
func (ps *Policies) Suspended() map[string]bool {
	out := make(map[string]bool, len(ps.suspended))
	for name := range ps.suspended {
		out[name] = true
	}
	for _, p := range ps.Ranked {
		if p.Spec.Suspend {
			out[p.Name] = true
		}
	}
	for name, c := range ps.deleting {
		if c.policy != nil && c.policy.Spec.Suspend {
			out[name] = true
		}
	}
	return out
}

// ErrManifestsChanged says that the API server holds another generation of
// a work than the cache: the decision waits for the cache to catch up (the
// work's event brings it back).
var ErrManifestsChanged = errors.New("the work changed since the cache read it")

// withManifestsOf is w with the manifests of live, the same work at the same
// generation.
func withManifestsOf(w, live *workv1.ManifestWork) (*workv1.ManifestWork, error) {
	if live.UID != w.UID || live.Generation != w.Generation {
		return nil, fmt.Errorf("ManifestWork %s/%s: %w (generation %d cached, %d stored)",
			w.Namespace, w.Name, ErrManifestsChanged, w.Generation, live.Generation)
	}
	out := *w
	out.Spec.Workload = live.Spec.Workload
	return &out, nil
}

// ListWithManifests gives each work of a namespace, read from the cache and
// not being deleted, the manifests the API server stores, in one list. It
// returns the works it could not give them (gone, or at another generation
// there), whose events will come; an error when the list fails.
func ListWithManifests(ctx context.Context, apiReader client.Reader, namespace string, works []workv1.ManifestWork) (map[types.UID]error, error) {
	if !slices.ContainsFunc(works, func(w workv1.ManifestWork) bool { return w.DeletionTimestamp == nil }) {
		return nil, nil
	}
	var live workv1.ManifestWorkList
	if err := apiReader.List(ctx, &live, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("reading the manifests of the ManifestWorks in %s: %w", namespace, err)
	}
	byUID := make(map[types.UID]*workv1.ManifestWork, len(live.Items))
	for i := range live.Items {
		byUID[live.Items[i].UID] = &live.Items[i]
	}
	unread := map[types.UID]error{}
	for i := range works {
		w := &works[i]
		if w.DeletionTimestamp != nil {
			continue // not decided again
		}
		l, ok := byUID[w.UID]
		if !ok {
			unread[w.UID] = fmt.Errorf("ManifestWork %s/%s: %w (deleted)", namespace, w.Name, ErrManifestsChanged)
			continue
		}
		full, err := withManifestsOf(w, l)
		if err != nil {
			unread[w.UID] = err
			continue
		}
		*w = *full
	}
	return unread, nil
}
