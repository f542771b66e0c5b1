package main

import (
	"errors"
	"fmt"
	"sort"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// webhooks turns the webhook configurations into webhookdefinitions. OLM
// creates a service for each webhook's deployment, serves it the
// certificate and fills in the caBundle, so the webhook services and the
// certificates are left out.
func (g *generator) webhooks() ([]v1alpha1.WebhookDescription, error) {
	services := map[string]*unstructured.Unstructured{}
	for _, u := range g.objs {
		if u.GetKind() == "Service" {
			services[u.GetNamespace()+"/"+u.GetName()] = u
		}
	}
	var defs []v1alpha1.WebhookDescription
	for _, u := range g.objs {
		hooks, typ, err := webhooksOf(u)
		if err != nil {
			return nil, err
		}
		if typ == "" {
			continue
		}
		g.done[objectKey(u)] = true
		g.bundle.InCSV = append(g.bundle.InCSV, Note{objectKey(u), "CSV webhookdefinitions"})
		for _, w := range hooks {
			d, svc, err := g.webhook(w, typ, services)
			if err != nil {
				return nil, fmt.Errorf("%s: webhook %s: %w", objectKey(u), w.Name, err)
			}
			defs = append(defs, d)
			if !g.done[objectKey(svc)] {
				g.done[objectKey(svc)] = true
				g.bundle.LeftOut = append(g.bundle.LeftOut, Note{objectKey(svc), "OLM creates the service of the webhookdefinitions"})
			}
		}
	}
	sort.Slice(defs, func(i, j int) bool {
		if defs[i].Type != defs[j].Type {
			return defs[i].Type < defs[j].Type
		}
		return defs[i].GenerateName < defs[j].GenerateName
	})
	return defs, nil
}

// webhooksOf reads the webhooks of a webhook configuration, validating ones
// in the fields of mutating ones, and their type; typ is empty for an
// object of another kind.
func webhooksOf(u *unstructured.Unstructured) (hooks []admissionregistrationv1.MutatingWebhook, typ v1alpha1.WebhookAdmissionType, err error) {
	switch u.GetKind() {
	case "ValidatingWebhookConfiguration":
		c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := fromUnstructured(u, c); err != nil {
			return nil, "", err
		}
		for _, w := range c.Webhooks {
			hooks = append(hooks, admissionregistrationv1.MutatingWebhook{
				Name: w.Name, ClientConfig: w.ClientConfig, Rules: w.Rules, FailurePolicy: w.FailurePolicy,
				MatchPolicy: w.MatchPolicy, NamespaceSelector: w.NamespaceSelector, ObjectSelector: w.ObjectSelector,
				SideEffects: w.SideEffects, TimeoutSeconds: w.TimeoutSeconds,
				AdmissionReviewVersions: w.AdmissionReviewVersions, MatchConditions: w.MatchConditions,
			})
		}
		return hooks, v1alpha1.ValidatingAdmissionWebhook, nil
	case "MutatingWebhookConfiguration":
		c := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := fromUnstructured(u, c); err != nil {
			return nil, "", err
		}
		return c.Webhooks, v1alpha1.MutatingAdmissionWebhook, nil
	}
	return nil, "", nil
}

// webhook turns one webhook into a webhookdefinition served by the
// deployment whose pods its service selects; it returns that service too.
func (g *generator) webhook(w admissionregistrationv1.MutatingWebhook, typ v1alpha1.WebhookAdmissionType, services map[string]*unstructured.Unstructured) (v1alpha1.WebhookDescription, *unstructured.Unstructured, error) {
	var d v1alpha1.WebhookDescription
	ref := w.ClientConfig.Service
	switch {
	case ref == nil:
		return d, nil, errors.New("only service webhooks can be served by OLM, not a URL")
	case w.NamespaceSelector != nil && (len(w.NamespaceSelector.MatchLabels) > 0 || len(w.NamespaceSelector.MatchExpressions) > 0):
		return d, nil, errors.New("OLM sets the namespaceSelector from the OperatorGroup: leave it out")
	case len(w.MatchConditions) > 0:
		return d, nil, errors.New("webhookdefinitions cannot carry matchConditions")
	}
	svcObj, ok := services[ref.Namespace+"/"+ref.Name]
	if !ok {
		return d, nil, fmt.Errorf("service %s/%s is not in %s", ref.Namespace, ref.Name, ManifestsSource)
	}
	svc := &corev1.Service{}
	if err := fromUnstructured(svcObj, svc); err != nil {
		return d, nil, err
	}
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	target := targetPort(svc, port)
	if target == nil {
		return d, nil, fmt.Errorf("service %s/%s has no port %d", ref.Namespace, ref.Name, port)
	}
	deployment, err := g.selectedDeployment(svc)
	if err != nil {
		return d, nil, fmt.Errorf("service %s/%s %w", ref.Namespace, ref.Name, err)
	}
	d = v1alpha1.WebhookDescription{
		GenerateName:            w.Name,
		Type:                    typ,
		DeploymentName:          deployment,
		ContainerPort:           port,
		TargetPort:              target,
		Rules:                   w.Rules,
		FailurePolicy:           w.FailurePolicy,
		MatchPolicy:             w.MatchPolicy,
		ObjectSelector:          w.ObjectSelector,
		SideEffects:             w.SideEffects,
		TimeoutSeconds:          w.TimeoutSeconds,
		AdmissionReviewVersions: w.AdmissionReviewVersions,
		WebhookPath:             ref.Path,
	}
	if typ == v1alpha1.MutatingAdmissionWebhook {
		d.ReinvocationPolicy = w.ReinvocationPolicy
	}
	return d, svcObj, nil
}

// targetPort is the target port of the service's port, the port itself
// when the target is left out; nil when the service has no such port.
func targetPort(svc *corev1.Service, port int32) *intstr.IntOrString {
	var target *intstr.IntOrString
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			t := p.TargetPort
			if t.Type == intstr.Int && t.IntVal == 0 {
				t = intstr.FromInt32(p.Port)
			}
			target = &t
		}
	}
	return target
}

// selectedDeployment names the one deployment whose pods the service
// selects; its error completes "service NAMESPACE/NAME".
func (g *generator) selectedDeployment(svc *corev1.Service) (string, error) {
	var deployment string
	for _, u := range g.deployments {
		podLabels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
		if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
			if deployment != "" {
				return "", errors.New("selects the pods of more than one deployment")
			}
			deployment = u.GetName()
		}
	}
	if deployment == "" {
		return "", errors.New("selects the pods of no deployment")
	}
	return deployment, nil
}
