// Package config_test builds every kustomize base under config/ and checks
// what a platform team relies on when it installs the operator: every base
// builds, the manager runs under a restricted security context, and the
// operator's permissions are the least it needs.
package config_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

func build(t *testing.T, base string) resmap.ResMap {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(testenv.RepoRoot(), "config", base))
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", base, err)
	}
	return m
}

// decode finds the objects of a kind in a build and decodes them into T.
func decode[T any](t *testing.T, m resmap.ResMap, kind string) []T {
	t.Helper()
	var out []T
	for _, r := range m.Resources() {
		if r.GetKind() != kind {
			continue
		}
		raw, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var obj T
		if err := yaml.UnmarshalStrict(raw, &obj); err != nil {
			t.Fatalf("%s %s: %v", kind, r.GetName(), err)
		}
		out = append(out, obj)
	}
	return out
}

// TestEveryBaseBuilds builds each folder of config/ that has a kustomization.
func TestEveryBaseBuilds(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "*", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 8 {
		t.Fatalf("expected the kubebuilder bases under config/, found %d", len(dirs))
	}
	for _, d := range dirs {
		base := filepath.Base(filepath.Dir(d))
		t.Run(base, func(t *testing.T) {
			if m := build(t, base); m.Size() == 0 {
				t.Fatalf("config/%s builds nothing", base)
			}
		})
	}
}

// TestManagerIsRestricted checks the Deployment config/default installs
// against the restricted Pod Security Standard, and its namespace enforces it.
func TestManagerIsRestricted(t *testing.T) {
	g := NewWithT(t)
	m := build(t, "default")

	namespaces := decode[corev1.Namespace](t, m, "Namespace")
	g.Expect(namespaces).To(HaveLen(1))
	g.Expect(namespaces[0].Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))

	deployments := decode[appsv1.Deployment](t, m, "Deployment")
	g.Expect(deployments).To(HaveLen(1))
	pod := deployments[0].Spec.Template.Spec
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	g.Expect(pod.ServiceAccountName).To(Equal("cleanup-operator-controller-manager"))
	g.Expect(pod.HostNetwork || pod.HostPID || pod.HostIPC).To(BeFalse())
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		g.Expect(sc).NotTo(BeNil(), c.Name)
		g.Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), c.Name)
		g.Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), c.Name)
		g.Expect(sc.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")), c.Name)
		g.Expect(sc.Capabilities.Add).To(BeEmpty(), c.Name)
		g.Expect(sc.Privileged).To(Or(BeNil(), HaveValue(BeFalse())), c.Name)
		g.Expect(c.Resources.Limits).To(HaveKey(corev1.ResourceMemory), c.Name)
		// The manager sets its soft memory limit to 90% of this limit
		// itself (cmd/memory.go); GOMEMLIMIT here would override that.
		g.Expect(c.Env).NotTo(ContainElement(HaveField("Name", "GOMEMLIMIT")), c.Name)
	}
}

// TestPermissionsAreLeast checks the operator's ClusterRoles: no wildcard,
// no Secrets, no update where the operator only patches, write verbs only on
// what a cleanup changes, and every binding to the operator's own account.
func TestPermissionsAreLeast(t *testing.T) {
	g := NewWithT(t)
	m := build(t, "default")
	roles := map[string]rbacv1.ClusterRole{}
	for _, r := range decode[rbacv1.ClusterRole](t, m, "ClusterRole") {
		roles[r.Name] = r
	}
	manager, ok := roles["cleanup-operator-manager-role"]
	g.Expect(ok).To(BeTrue(), "the manager's ClusterRole")

	// What the operator may write, and why.
	writable := map[string][]string{
		"/namespaces": {"delete", "patch"},           // the deleting label, the namespace's removal
		"/configmaps": {"create", "delete", "patch"}, // the cleanup-decisions ConfigMap
		"cluster.open-cluster-management.io/managedclusters":             {"patch"},                                         // finalizer, annotations
		"cluster.open-cluster-management.io/managedclusters/status":      {"patch"},                                         // ContentDeleteSuccess
		"work.open-cluster-management.io/manifestworks":                  {"create", "delete", "deletecollection", "patch"}, // signal work, stages (a whole group in one request), deleteOption
		"addon.open-cluster-management.io/managedclusteraddons":          {"delete", "deletecollection", "patch"},           // the addons stage
		"policy.open-cluster-management.io/configurationpolicies":        {"patch"},                                         // pruneObjectBehavior
		"cleanup.fleetops.dev/cleanuppolicies":                           {"patch"},                                         // the in-use finalizer
		"cleanup.fleetops.dev/cleanuppolicies/status":                    {"patch"},
		"events.k8s.io/events":                                           {"create", "patch"},
		"admissionregistration.k8s.io/validatingadmissionpolicies":       {"create"},
		"admissionregistration.k8s.io/validatingadmissionpolicybindings": {"create"},
		"flowcontrol.apiserver.k8s.io/flowschemas":                       {"create"}, // created at start when absent
		"flowcontrol.apiserver.k8s.io/prioritylevelconfigurations":       {"create"},
	}
	readVerbs := []string{"get", "list", "watch"}
	for _, name := range []string{"cleanup-operator-manager-role", "cleanup-operator-manager-extra-resources"} {
		role, ok := roles[name]
		g.Expect(ok).To(BeTrue(), name)
		for _, rule := range role.Rules {
			g.Expect(rule.NonResourceURLs).To(BeEmpty(), name)
			for _, group := range rule.APIGroups {
				g.Expect(group).NotTo(Equal("*"), name)
				for _, res := range rule.Resources {
					g.Expect(res).NotTo(Equal("*"), name)
					g.Expect(res).NotTo(Equal("secrets"), name)
					for _, verb := range rule.Verbs {
						if slices.Contains(readVerbs, verb) {
							continue
						}
						key := group + "/" + res
						g.Expect(writable[key]).To(ContainElement(verb), "%s may %s %s", name, verb, key)
					}
				}
			}
		}
	}
	g.Expect(manager.AggregationRule).To(BeNil())

	for _, b := range decode[rbacv1.ClusterRoleBinding](t, m, "ClusterRoleBinding") {
		if !strings.HasPrefix(b.RoleRef.Name, "cleanup-operator-manager") {
			continue
		}
		g.Expect(b.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount",
			Name: "cleanup-operator-controller-manager", Namespace: "cleanup-operator-system"}), b.Name)
	}
}
