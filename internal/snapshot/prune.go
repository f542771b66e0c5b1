package snapshot

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

var (
	configurationPolicyGVK = schema.GroupVersionKind{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "ConfigurationPolicy"}
	policyGVK              = schema.GroupVersionKind{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "Policy"}
)

// Prune decides pruneObjectBehavior for the ConfigurationPolicies in the
// cluster namespace and for the ConfigurationPolicy templates of the
// Policies placed on the cluster (decided on the root Policy's template),
// for the preview. Kinds the API server does not serve have none.
func (r *Reader) Prune(ctx context.Context, g *decision.Governed, namespace string) ([]decision.PrunePlan, error) {
	if g.Policy == nil || g.Policy.Spec.Prune == nil {
		return nil, nil
	}
	decide := func(object string, definition map[string]any) decision.PrunePlan {
		pp := decision.PrunePlan{Object: object}
		b, err := decision.PruneBehavior(g.Policy, g.Activation, definition)
		if err != nil {
			pp.Error = err.Error()
			return pp
		}
		pp.Behavior, pp.Ineffective = b, decision.Ineffective(b, definition)
		return pp
	}
	var out []decision.PrunePlan
	if r.serves(configurationPolicyGVK) {
		cps := &unstructured.UnstructuredList{}
		cps.SetGroupVersionKind(configurationPolicyGVK.GroupVersion().WithKind("ConfigurationPolicyList"))
		if err := r.Client.List(ctx, cps, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("listing ConfigurationPolicies: %w", err)
		}
		for _, cp := range cps.Items {
			out = append(out, decide("ConfigurationPolicy "+cp.GetName(), cp.Object))
		}
	}
	if !r.serves(policyGVK) {
		return out, nil
	}
	roots, err := r.rootsPlacedIn(ctx, namespace)
	if err != nil {
		return nil, err
	}
	for _, root := range roots {
		for _, t := range decision.Templates(root) {
			pp := decide(fmt.Sprintf("Policy %s/%s template %s", root.GetNamespace(), root.GetName(), t.Name), t.Definition)
			if !decision.ReadsDecisions(t.Definition) {
				pp.HubTemplate = decision.DecisionHubTemplate(t.Name)
			}
			out = append(out, pp)
		}
	}
	return out, nil
}

// rootsPlacedIn are the root Policies replicated into a cluster namespace.
func (r *Reader) rootsPlacedIn(ctx context.Context, namespace string) ([]*unstructured.Unstructured, error) {
	replicated := &unstructured.UnstructuredList{}
	replicated.SetGroupVersionKind(policyGVK.GroupVersion().WithKind("PolicyList"))
	if err := r.Client.List(ctx, replicated, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing Policies: %w", err)
	}
	var out []*unstructured.Unstructured
	for _, rp := range replicated.Items {
		rootNS, rootName, ok := strings.Cut(rp.GetLabels()[decision.RootPolicyLabel], ".")
		if !ok {
			continue
		}
		root := &unstructured.Unstructured{}
		root.SetGroupVersionKind(policyGVK)
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: rootNS, Name: rootName}, root); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		out = append(out, root)
	}
	return out, nil
}

func (r *Reader) serves(gvk schema.GroupVersionKind) bool {
	_, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil
}
