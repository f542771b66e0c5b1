package main

import (
	"fmt"
	"slices"
	"sort"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// certSecrets are the secrets cert-manager writes serving certificates to.
func (g *generator) certSecrets() map[string]bool {
	secrets := map[string]bool{}
	for _, u := range g.objs {
		if u.GroupVersionKind().Group == "cert-manager.io" && u.GetKind() == "Certificate" {
			if name, _, _ := unstructured.NestedString(u.Object, "spec", "secretName"); name != "" {
				secrets[u.GetNamespace()+"/"+name] = true
			}
		}
	}
	return secrets
}

// installDeployments turns the deployments into the CSV's install
// deployments: without the cert-manager certificate volumes (OLM mounts its
// own certificate where controller-runtime looks by default), with the
// manager image replaced when Options.Image is set. It returns the images
// the deployments run, the manager's first.
func (g *generator) installDeployments() ([]v1alpha1.StrategyDeploymentSpec, []v1alpha1.RelatedImage, error) {
	secrets := g.certSecrets()
	var specs []v1alpha1.StrategyDeploymentSpec
	var images []v1alpha1.RelatedImage
	seen := map[string]bool{}
	for _, u := range g.deployments {
		if err := stripCertVolumes(u, secrets); err != nil {
			return nil, nil, err
		}
		if g.opts.Image != "" {
			if err := setManagerImage(u, g.opts.Image); err != nil {
				return nil, nil, err
			}
		}
		d := &appsv1.Deployment{}
		if err := fromUnstructured(u, d); err != nil {
			return nil, nil, err
		}
		specs = append(specs, v1alpha1.StrategyDeploymentSpec{
			Name:  d.Name,
			Spec:  d.Spec,
			Label: labels.Set(d.Labels),
		})
		manager := managerContainer(d.Spec.Template)
		containers := slices.Concat(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers)
		sort.SliceStable(containers, func(i, j int) bool { return containers[i].Name == manager && containers[j].Name != manager })
		for _, c := range containers {
			if !seen[c.Image] {
				seen[c.Image] = true
				images = append(images, v1alpha1.RelatedImage{Name: c.Name, Image: c.Image})
			}
		}
	}
	return specs, images, nil
}

// managerContainer is the name of the pod's main container: the one
// kubectl.kubernetes.io/default-container names, or the only one.
func managerContainer(t corev1.PodTemplateSpec) string {
	if name := t.Annotations["kubectl.kubernetes.io/default-container"]; name != "" {
		return name
	}
	if len(t.Spec.Containers) == 1 {
		return t.Spec.Containers[0].Name
	}
	return ""
}

// setManagerImage sets the image of the deployment's manager container.
func setManagerImage(u *unstructured.Unstructured, image string) error {
	d := &appsv1.Deployment{}
	if err := fromUnstructured(u, d); err != nil {
		return err
	}
	name := managerContainer(d.Spec.Template)
	if name == "" {
		return fmt.Errorf("%s: cannot tell the manager container: set kubectl.kubernetes.io/default-container", objectKey(u))
	}
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	for i, c := range containers {
		if m, ok := c.(map[string]any); ok && m["name"] == name {
			m["image"] = image
			containers[i] = m
		}
	}
	return unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
}

// stripCertVolumes removes the volumes of the given certificate secrets and
// their mounts from the deployment.
func stripCertVolumes(u *unstructured.Unstructured, secrets map[string]bool) error {
	volumes, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "volumes")
	stripped := map[string]bool{}
	var kept []any
	for _, v := range volumes {
		m, _ := v.(map[string]any)
		secret, _, _ := unstructured.NestedString(m, "secret", "secretName")
		if secret != "" && secrets[u.GetNamespace()+"/"+secret] {
			name, _, _ := unstructured.NestedString(m, "name")
			stripped[name] = true
			continue
		}
		kept = append(kept, v)
	}
	if len(stripped) == 0 {
		return nil
	}
	if len(kept) == 0 {
		unstructured.RemoveNestedField(u.Object, "spec", "template", "spec", "volumes")
	} else if err := unstructured.SetNestedSlice(u.Object, kept, "spec", "template", "spec", "volumes"); err != nil {
		return err
	}
	for _, field := range []string{"initContainers", "containers"} {
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", field)
		for i, c := range containers {
			m, _ := c.(map[string]any)
			mounts, _, _ := unstructured.NestedSlice(m, "volumeMounts")
			var keptMounts []any
			for _, mount := range mounts {
				name, _, _ := unstructured.NestedString(mount.(map[string]any), "name")
				if !stripped[name] {
					keptMounts = append(keptMounts, mount)
				}
			}
			if len(keptMounts) == 0 {
				delete(m, "volumeMounts")
			} else {
				m["volumeMounts"] = keptMounts
			}
			containers[i] = m
		}
		if len(containers) > 0 {
			if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", field); err != nil {
				return err
			}
		}
	}
	return nil
}
