package review

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/settings"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// HubAPIVersion and HubKind name the snapshot document; a change of its
// shape changes the version.
const (
	HubAPIVersion = "cleanup.fleetops.dev/v1alpha1"
	HubKind       = "HubSnapshot"
)

// Hub is what `kubectl cleanup diff` reads of a hub, as one document: the
// resources the API server serves, and the objects the decisions read.
// Secrets are never in it, nor the data of a Secret written inside another
// object (a ManifestWork's manifest, a ConfigurationPolicy's template), nor
// managedFields and last-applied annotations.
type Hub struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Resources are the resources the API server serves, as discovery
	// lists them.
	Resources []Resource `json:"resources"`
	// Listed are the resources (resource.group) whose objects the snapshot
	// holds, as metadata, in every namespace: those the policies' monitored
	// resources and stages name.
	Listed []string `json:"listed"`
	// Omitted are the resources the policies name that it does not hold.
	Omitted []Omitted `json:"omitted,omitempty"`
	// Objects are ManagedClusters, CleanupPolicies, Namespaces,
	// ManifestWorks, ConfigurationPolicies and Policies whole, the CRDs of
	// the expressions' variables and CleanupPolicies, the metadata of the
	// Listed resources, and that of the teardown records.
	Objects []map[string]any `json:"objects"`
	// Operator are the operator's settings the decisions take (the blast
	// radius, the namespaces never deleted, ...): those it publishes, else
	// its defaults, as Warnings then say. Absent: the defaults.
	Operator *settings.Settings `json:"operator,omitempty"`
	// Records is the namespace whose teardown records (their metadata)
	// Objects hold; empty when they could not be read.
	Records string `json:"records,omitempty"`
	// Warnings say what could not be read, and what the decisions assume
	// instead.
	Warnings []string `json:"warnings,omitempty"`
}

// Resource is one served resource.
type Resource struct {
	Group      string `json:"group,omitempty"`
	Version    string `json:"version"`
	Kind       string `json:"kind"`
	Resource   string `json:"resource"`
	Namespaced bool   `json:"namespaced"`
}

// Omitted is a resource the snapshot leaves out, and why.
type Omitted struct {
	Resource string `json:"resource"`
	Why      string `json:"why"`
}

// secretsOmitted says why Secrets are never taken.
const secretsOmitted = "a snapshot never holds Secrets"

var (
	cleanupPolicyGK = snapshot.CleanupPolicyGVK.GroupKind()
	crdGVR          = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	// alwaysTaken are the resources taken whole, whatever the policies say.
	alwaysTaken = []schema.GroupVersionResource{
		{Group: "cluster.open-cluster-management.io", Version: "v1", Resource: "managedclusters"},
		{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Resource: "cleanuppolicies"},
		{Version: "v1", Resource: "namespaces"},
		decision.ManifestWorks,
		{Group: "policy.open-cluster-management.io", Version: "v1", Resource: "configurationpolicies"},
		{Group: "policy.open-cluster-management.io", Version: "v1", Resource: "policies"},
		crdGVR,
	}
)

// Take reads a hub: discovery, the kinds always taken, the metadata of
// every resource the live policies and the proposed ones name, and the
// operator's settings and teardown records in operatorNamespace (empty:
// record.Namespace). Secrets are left out unless withSecrets (a snapshot
// kept in memory by a live diff, never written: their metadata only).
func Take(ctx context.Context, c client.Reader, disc discovery.DiscoveryInterface, proposed []*unstructured.Unstructured,
	withSecrets bool, operatorNamespace string) (*Hub, error) {
	h := &Hub{APIVersion: HubAPIVersion, Kind: HubKind, Listed: []string{}, Objects: []map[string]any{}}
	if err := h.discover(disc); err != nil {
		return nil, err
	}
	mapper := h.mapper()
	policies := &unstructured.UnstructuredList{}
	policies.SetGroupVersionKind(snapshot.CleanupPolicyGVK.GroupVersion().WithKind("CleanupPolicyList"))
	if err := c.List(ctx, policies); err != nil {
		return nil, fmt.Errorf("listing CleanupPolicies: %w", err)
	}
	named := slices.Clone(proposed)
	for i := range policies.Items {
		named = append(named, &policies.Items[i])
	}
	for _, gvr := range alwaysTaken {
		if err := h.take(ctx, c, mapper, gvr, false); err != nil {
			return nil, err
		}
	}
	for _, gvr := range resourcesNamed(named) {
		if gvr.GroupResource() == (schema.GroupResource{Resource: "secrets"}) && !withSecrets {
			h.Omitted = append(h.Omitted, Omitted{Resource: "secrets", Why: secretsOmitted})
			continue
		}
		if slices.Contains(alwaysTaken, gvr) {
			continue
		}
		if err := h.take(ctx, c, mapper, gvr, true); err != nil {
			return nil, err
		}
	}
	if err := h.takeOperator(ctx, c, record.Namespace(operatorNamespace)); err != nil {
		return nil, err
	}
	h.warnWindows(policies.Items)
	return h, nil
}

// discover lists the served resources; a group discovery cannot read is
// left out (its resources count as not served), as the REST mapper does.
func (h *Hub) discover(disc discovery.DiscoveryInterface) error {
	_, lists, err := disc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return fmt.Errorf("discovering the served resources: %w", err)
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return err
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			h.Resources = append(h.Resources, Resource{Group: gv.Group, Version: gv.Version, Kind: r.Kind, Resource: r.Name, Namespaced: r.Namespaced})
		}
	}
	return nil
}

// take lists a resource hub-wide, whole or as metadata, if it is served.
func (h *Hub) take(ctx context.Context, c client.Reader, mapper meta.RESTMapper, gvr schema.GroupVersionResource, metadata bool) error {
	gvk, err := mapper.KindFor(gvr)
	if meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return err
	}
	h.Listed = append(h.Listed, gvr.GroupResource().String())
	var list client.ObjectList = &unstructured.UnstructuredList{}
	if metadata {
		list = &metav1.PartialObjectMetadataList{}
	}
	list.GetObjectKind().SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	err = c.List(ctx, list)
	if gvr == crdGVR && apierrors.IsForbidden(err) {
		// The expressions' variables are then untyped, as in the preview.
		h.Listed = h.Listed[:len(h.Listed)-1]
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
	}
	return meta.EachListItem(list, func(o runtime.Object) error {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: obj}
		if gvr == crdGVR && !slices.Contains(takenCRDs, u.GetName()) {
			return nil
		}
		u.SetGroupVersionKind(gvk)
		h.Objects = append(h.Objects, sanitize(u).Object)
		return nil
	})
}

// takenCRDs are the CRDs of the expressions' variables, and the
// CleanupPolicy CRD, whose defaults the proposed policies get.
var takenCRDs = []string{cel.ManagedClusterCRD, cel.ManifestWorkCRD, cel.ConfigurationPolicyCRD, cleanupPolicyCRD}

// sanitize drops what a snapshot never holds: the data of any Secret
// written inside the object, its last-applied annotation, and its
// managedFields.
func sanitize(u *unstructured.Unstructured) *unstructured.Unstructured {
	redactSecrets(u.Object)
	if a := u.GetAnnotations(); a != nil {
		delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		u.SetAnnotations(a)
	}
	u.SetManagedFields(nil)
	return u
}

// redactSecrets removes data and stringData from every Secret nested in v.
func redactSecrets(v any) {
	switch t := v.(type) {
	case map[string]any:
		if t["kind"] == "Secret" {
			delete(t, "data")
			delete(t, "stringData")
		}
		for _, x := range t {
			redactSecrets(x)
		}
	case []any:
		for _, x := range t {
			redactSecrets(x)
		}
	}
}

// resourcesNamed are the resources the policies' monitored resources and
// stages name, and the default stages'. A policy that does not decode
// names none.
func resourcesNamed(policies []*unstructured.Unstructured) []schema.GroupVersionResource {
	out := []schema.GroupVersionResource{decision.ManifestWorks, decision.ManagedClusterAddOns}
	add := func(g v1alpha1.GroupVersionResource) {
		gvr := schema.GroupVersionResource{Group: g.Group, Version: g.Version, Resource: g.Resource}
		if !slices.Contains(out, gvr) {
			out = append(out, gvr)
		}
	}
	for _, u := range policies {
		p, errs := cel.DecodePolicy(u.Object)
		if len(errs) > 0 || p == nil {
			continue
		}
		for _, m := range p.Spec.MonitoredResources {
			add(m.GroupVersionResource)
		}
		for _, s := range p.Spec.DeletionStages {
			add(s.GroupVersionResource)
		}
	}
	return out
}

// mapper is the REST mapper of the served resources.
func (h *Hub) mapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, r := range h.Resources {
		gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		scope := meta.RESTScopeRoot
		if r.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		plural := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
		singular := plural
		singular.Resource = strings.ToLower(r.Kind)
		m.AddSpecific(gvk, plural, singular, scope)
	}
	return m
}

// Check says whether a document read from a file is a snapshot this
// version reads.
func (h *Hub) Check() error {
	if h.APIVersion != HubAPIVersion || h.Kind != HubKind {
		return errors.New("not a hub snapshot: apiVersion " + HubAPIVersion + ", kind " + HubKind + " expected (take one with `kubectl cleanup snapshot`)")
	}
	return nil
}
