package decision

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// OCMClusterNameLabel is the label OCM's registration puts on the
// namespace of a cluster, naming the cluster. OCM puts it on a namespace
// that existed before too, so it alone does not show that OCM made it.
const OCMClusterNameLabel = "open-cluster-management.io/cluster-name"

// DefaultNamespaceDeny are the namespaces a teardown never deletes,
// whatever their labels, as path.Match patterns; the operator adds its own
// namespace and the manager's --namespace-deny.
var DefaultNamespaceDeny = []string{"default", "kube-*", "openshift-*", "open-cluster-management*"}

// NamespaceKept says why a teardown must keep ns rather than delete it as
// the namespace of cluster, or "" when ns is the one OCM made for it: it
// carries OCMClusterNameLabel naming the cluster, it was created no
// earlier than the cluster (timestamps have a second's granularity: the
// same second counts as made for it), and no pattern of deny matches its
// name. A bad pattern keeps every namespace: when in doubt, keep.
func NamespaceKept(ns *corev1.Namespace, cluster metav1.Object, deny []string) string {
	for _, pattern := range deny {
		matched, err := path.Match(pattern, ns.Name)
		if err != nil {
			return fmt.Sprintf("the namespace deny pattern %q is malformed (%v): no cluster namespace is deleted until it is fixed", pattern, err)
		}
		if matched {
			return fmt.Sprintf("namespace %s is on the deny list (%q): the operator never deletes it", ns.Name, pattern)
		}
	}
	if v, ok := ns.Labels[OCMClusterNameLabel]; !ok || v != cluster.GetName() {
		return fmt.Sprintf("namespace %s does not carry OCM's label %s=%s: OCM did not make it for the cluster", ns.Name, OCMClusterNameLabel, cluster.GetName())
	}
	made, born := ns.CreationTimestamp, cluster.GetCreationTimestamp()
	if made.Before(&born) {
		return fmt.Sprintf("namespace %s was created at %s, before the ManagedCluster (%s): it existed before the cluster, so OCM did not make it for it",
			ns.Name, made.UTC().Format("2006-01-02T15:04:05Z"), born.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return ""
}

// NamespaceDenyList is the deny list in force: DefaultNamespaceDeny, the
// operator's own namespace and the extra patterns.
func NamespaceDenyList(operatorNamespace string, extra []string) []string {
	out := append(append([]string{}, DefaultNamespaceDeny...), operatorNamespace)
	return append(out, extra...)
}

// namespaceDeny is the deny list of a snapshot: its own, else the defaults.
func namespaceDeny(s *Snapshot) []string {
	if s.NamespaceDeny != nil {
		return s.NamespaceDeny
	}
	return DefaultNamespaceDeny
}

// Marked is the policy whose mark the namespace carries
// (v1alpha1.GovernedNamespaceLabel "true" and the policy's name), or ""
// when it carries none.
func Marked(ns *corev1.Namespace) string {
	if ns.Labels[v1alpha1.GovernedNamespaceLabel] != "true" {
		return ""
	}
	return ns.Annotations[v1alpha1.GoverningPolicyAnnotation]
}

// HasMark says whether the namespace carries any part of the mark: the
// label, whatever its value, or the policy's name.
func HasMark(ns *corev1.Namespace) bool {
	_, labelled := ns.Labels[v1alpha1.GovernedNamespaceLabel]
	_, annotated := ns.Annotations[v1alpha1.GoverningPolicyAnnotation]
	return labelled || annotated
}
