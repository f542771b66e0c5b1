package main

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestVersionOf: the operator's version is its manager image's tag when
// the tag is a release, else the Deployment's version label.
func TestVersionOf(t *testing.T) {
	for _, c := range []struct {
		image, label, want string
	}{
		{"ghcr.io/fleetops-dev/cleanup-operator:v0.1.0", "", "v0.1.0"},
		{"ghcr.io/fleetops-dev/cleanup-operator:0.2.0", "v0.1.0", "0.2.0"},
		{"registry:5000/cleanup-operator:v1.2.3-rc.1", "", "v1.2.3-rc.1"},
		{"ghcr.io/fleetops-dev/cleanup-operator@sha256:0123", "v0.3.0", "v0.3.0"},
		{"ghcr.io/fleetops-dev/cleanup-operator:v0.4.0@sha256:0123", "", "v0.4.0"},
		{"registry:5000/cleanup-operator", "", ""},
		{"controller:latest", "", ""},
	} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Labels: map[string]string{}}}
		if c.label != "" {
			d.Labels[versionLabel] = c.label
		}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "kube-rbac-proxy", Image: "proxy:v9.9.9"}, {Name: "manager", Image: c.image}}
		if got := versionOf(d); got.Version != c.want || got.Image != c.image || got.Deployment != "ns/m" {
			t.Errorf("image %q, label %q: got %+v, want version %q", c.image, c.label, got, c.want)
		}
	}
}
