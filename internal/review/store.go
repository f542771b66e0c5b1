package review

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/fleetops-dev/cleanup-operator/internal/scheme"
)

// store is a read-only client over the objects of a Hub, indexed by kind
// and namespace, so that the decisions read a snapshot as they read an API
// server. It answers only what the snapshot holds: a list of a served
// resource the snapshot did not take fails, naming it.
type store struct {
	scheme  *runtime.Scheme
	mapper  meta.RESTMapper
	objects map[schema.GroupKind]map[string][]*unstructured.Unstructured
	byName  map[schema.GroupKind]map[types.NamespacedName]*unstructured.Unstructured
	// listed are the resources whose objects the snapshot holds in every
	// cluster namespace (besides the kinds it always takes whole).
	listed map[schema.GroupResource]bool
	// listedIn are the resources whose objects it holds in one namespace
	// only: the teardown records' ConfigMaps.
	listedIn map[schema.GroupResource]string
	// omitted are the resources it never holds, and why.
	omitted map[schema.GroupResource]string
}

var _ client.Reader = (*store)(nil)

// errNotHeld is the error of a read of a resource the snapshot does not hold.
var errNotHeld = errors.New("the snapshot does not hold")

func newStore(h *Hub) (*store, error) {
	s := &store{scheme: scheme.New(), mapper: h.mapper(), objects: map[schema.GroupKind]map[string][]*unstructured.Unstructured{},
		byName: map[schema.GroupKind]map[types.NamespacedName]*unstructured.Unstructured{},
		listed: map[schema.GroupResource]bool{}, omitted: map[schema.GroupResource]string{}, listedIn: map[schema.GroupResource]string{}}
	for _, r := range h.Listed {
		s.listed[schema.ParseGroupResource(r)] = true
	}
	for _, r := range alwaysTaken {
		s.listed[r.GroupResource()] = true
	}
	if h.Records != "" && !s.listed[configMapsGR] {
		s.listedIn[configMapsGR] = h.Records
	}
	for _, r := range h.Omitted {
		s.omitted[schema.ParseGroupResource(r.Resource)] = r.Why
	}
	for i := range h.Objects {
		u := &unstructured.Unstructured{Object: h.Objects[i]}
		if u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("objects[%d]: an object without kind or metadata.name", i)
		}
		s.add(u)
	}
	return s, nil
}

func (s *store) add(u *unstructured.Unstructured) {
	gk := u.GroupVersionKind().GroupKind()
	if s.objects[gk] == nil {
		s.objects[gk] = map[string][]*unstructured.Unstructured{}
	}
	s.objects[gk][u.GetNamespace()] = append(s.objects[gk][u.GetNamespace()], u)
	if s.byName[gk] == nil {
		s.byName[gk] = map[types.NamespacedName]*unstructured.Unstructured{}
	}
	s.byName[gk][types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}] = u
}

// withPolicies is a store that shares everything with s but its
// CleanupPolicies, which are policies.
func (s *store) withPolicies(policies []*unstructured.Unstructured) *store {
	out := *s
	out.objects = make(map[schema.GroupKind]map[string][]*unstructured.Unstructured, len(s.objects))
	for gk, byNS := range s.objects {
		out.objects[gk] = byNS
	}
	out.byName = make(map[schema.GroupKind]map[types.NamespacedName]*unstructured.Unstructured, len(s.byName))
	for gk, byName := range s.byName {
		out.byName[gk] = byName
	}
	delete(out.objects, cleanupPolicyGK)
	delete(out.byName, cleanupPolicyGK)
	for _, p := range policies {
		out.add(p)
	}
	return &out
}

func (s *store) kindOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return gvk, err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return gvk, nil
}

// Get implements client.Reader.
func (s *store) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := s.kindOf(obj)
	if err != nil {
		return err
	}
	if err := s.check(gvk, key.Namespace); err != nil {
		return err
	}
	if u, ok := s.byName[gvk.GroupKind()][key]; ok {
		return s.into(u, obj, gvk)
	}
	return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name)
}

// List implements client.Reader: by namespace and label selector.
func (s *store) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := s.kindOf(list)
	if err != nil {
		return err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if err := s.check(gvk, lo.Namespace); err != nil {
		return err
	}
	byNS := s.objects[gvk.GroupKind()]
	if lo.Namespace != "" {
		byNS = map[string][]*unstructured.Unstructured{lo.Namespace: byNS[lo.Namespace]}
	}
	var matched []*unstructured.Unstructured
	for _, items := range byNS {
		for _, u := range items {
			if lo.LabelSelector == nil || lo.LabelSelector.Matches(labelsOf(u)) {
				matched = append(matched, u)
			}
		}
	}
	objs := make([]runtime.Object, 0, len(matched))
	for _, u := range matched {
		item, err := s.newItem(list, gvk)
		if err != nil {
			return err
		}
		if err := s.into(u, item, gvk); err != nil {
			return err
		}
		objs = append(objs, item)
	}
	return meta.SetList(list, objs)
}

// check fails for a resource the snapshot does not hold in namespace
// ("": in every namespace).
func (s *store) check(gvk schema.GroupVersionKind, namespace string) error {
	m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	gr := m.Resource.GroupResource()
	if why, ok := s.omitted[gr]; ok {
		return fmt.Errorf("%w %s: %s", errNotHeld, gr, why)
	}
	if ns, ok := s.listedIn[gr]; ok && namespace == ns {
		return nil
	}
	if !s.listed[gr] {
		return fmt.Errorf("%w %s: take it again with -f naming the proposed policies", errNotHeld, gr)
	}
	return nil
}

func (s *store) newItem(list client.ObjectList, gvk schema.GroupVersionKind) (client.Object, error) {
	switch list.(type) {
	case *unstructured.UnstructuredList:
		return &unstructured.Unstructured{}, nil
	case *metav1.PartialObjectMetadataList:
		return &metav1.PartialObjectMetadata{}, nil
	}
	obj, err := s.scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	return obj.(client.Object), nil
}

// into copies u into obj, whatever obj's type.
func (s *store) into(u *unstructured.Unstructured, obj client.Object, gvk schema.GroupVersionKind) error {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		o.Object = runtime.DeepCopyJSON(u.Object)
	case *metav1.PartialObjectMetadata:
		m, _ := u.Object["metadata"].(map[string]any)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &o.ObjectMeta); err != nil {
			return err
		}
		o.SetGroupVersionKind(gvk)
	default:
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return fmt.Errorf("%s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
	return nil
}

func labelsOf(u *unstructured.Unstructured) labels.Set { return u.GetLabels() }
