package e2e

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
)

const (
	policyNamespace  = "policies"
	rootPolicyName   = "prune-demo"
	configPolicyName = "my-config-policy"
	decisionsName    = "cleanup-decisions"
)

var policyGVR = schema.GroupVersionResource{Group: "policy.open-cluster-management.io", Version: "v1", Resource: "policies"}

// The root Policy as it would be in Git: its ConfigurationPolicy template
// reads the operator's decision with a hub template, which the propagator
// resolves per cluster.
var rootPolicyYAML = fmt.Sprintf(`
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  disabled: false
  remediationAction: enforce
  policy-templates:
  - objectDefinition:
      apiVersion: policy.open-cluster-management.io/v1
      kind: ConfigurationPolicy
      metadata:
        name: %[3]s
      spec:
        remediationAction: enforce
        severity: low
        pruneObjectBehavior: '{{hub fromConfigMap .PolicyMetadata.namespace "%[4]s" (printf "%%s.%%s" .ManagedClusterName "%[3]s") | default "None" hub}}'
        object-templates:
        - complianceType: musthave
          objectDefinition:
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: s9-settings
              namespace: workloads
            data:
              owner: policy
`, rootPolicyName, policyNamespace, configPolicyName, decisionsName)

var bindingYAML = fmt.Sprintf(`
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata:
  name: bind-%[1]s
  namespace: %[2]s
placementRef:
  apiGroup: cluster.open-cluster-management.io
  kind: Placement
  name: to-cluster1
subjects:
- apiGroup: policy.open-cluster-management.io
  kind: Policy
  name: %[1]s
`, rootPolicyName, policyNamespace)

func createYAML(manifest string) *unstructured.Unstructured {
	GinkgoHelper()
	u := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal([]byte(manifest), &u.Object)).To(Succeed())
	Expect(k8s.Create(ctx, u)).To(Succeed())
	DeferCleanup(func() { removeGone(u) })
	return u
}

// placeOnCluster1 creates a Placement and, as the placement controller would,
// its PlacementDecision selecting cluster1.
func placeOnCluster1() {
	GinkgoHelper()
	placement := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "to-cluster1", Namespace: policyNamespace}}
	Expect(k8s.Create(ctx, placement)).To(Succeed())
	DeferCleanup(func() { removeGone(placement) })
	decision := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{
		Name: "to-cluster1-decision-1", Namespace: policyNamespace,
		Labels:          map[string]string{clusterv1beta1.PlacementLabel: placement.Name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "cluster.open-cluster-management.io/v1beta1", Kind: "Placement", Name: placement.Name, UID: placement.UID}},
	}}
	Expect(k8s.Create(ctx, decision)).To(Succeed())
	DeferCleanup(func() { removeGone(decision) })
	decision.Status.Decisions = []clusterv1beta1.ClusterDecision{{ClusterName: clusterName, Reason: "placed by the test"}}
	Expect(k8s.Status().Update(ctx, decision)).To(Succeed())
}

// replicatedPrune returns the pruneObjectBehavior of the ConfigurationPolicy
// template in the replicated Policy in cluster1's namespace.
func replicatedPrune(g Gomega) string {
	g.Expect(prop.exited()).To(Succeed())
	p := &unstructured.Unstructured{}
	p.SetAPIVersion("policy.open-cluster-management.io/v1")
	p.SetKind("Policy")
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: clusterName, Name: policyNamespace + "." + rootPolicyName}, p)).To(Succeed())
	return templatePrune(p)
}

func templatePrune(p *unstructured.Unstructured) string {
	templates, _, _ := unstructured.NestedSlice(p.Object, "spec", "policy-templates")
	if len(templates) == 0 {
		return ""
	}
	v, _, _ := unstructured.NestedString(templates[0].(map[string]any), "objectDefinition", "spec", "pruneObjectBehavior")
	return v
}

// publishedDecision is the operator's decision for cluster1; it publishes a
// root Policy's decisions for the clusters holding its replicated Policy,
// which the propagator writes.
func publishedDecision(g Gomega) string {
	g.Expect(prop.exited()).To(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: policyNamespace, Name: decisionsName}, cm)).To(Succeed())
	return cm.Data[clusterName+"."+configPolicyName]
}

// Scenario 9: the operator publishes the prune decision for cluster1 in
// cleanup-decisions; the propagator resolves the template's hub template into
// the replicated Policy; changing the CleanupPolicy's rule changes it there.
func scenarioPrune() {
	joinCluster(map[string]string{scenarioLabel: "9"})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policyNamespace}}
	Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, ns))).To(Succeed())
	cpol := cleanupPolicy(policyYAML("s9", "9", `
removeStrategy:
  default: Required
prune:
  default: None
  rules:
  - when: "policy.spec.remediationAction.lowerAscii() == 'enforce'"
    behavior: DeleteIfCreated
`))
	governedBy("s9")
	placeOnCluster1()
	createYAML(rootPolicyYAML)
	createYAML(bindingYAML)

	Eventually(publishedDecision).Should(Equal("DeleteIfCreated"), "the operator has not published the decision")
	Eventually(replicatedPrune).Should(Equal("DeleteIfCreated"),
		"the replicated Policy does not carry the operator's decision")

	tl := newTimeline("scenario 9: prune decisions through the propagator",
		watched{kind: "ConfigMap", gvr: configMapGVR, namespace: policyNamespace, selector: "metadata.name=" + decisionsName,
			facts: func(u *unstructured.Unstructured) []string {
				v, _, _ := unstructured.NestedString(u.Object, "data", clusterName+"."+configPolicyName)
				return []string{clusterName + "." + configPolicyName + "=" + v}
			}},
		watched{kind: "replicated Policy", gvr: policyGVR, namespace: clusterName,
			facts: func(u *unstructured.Unstructured) []string {
				return []string{"pruneObjectBehavior " + templatePrune(u)}
			}},
	)
	tl.zeroNow("test: CleanupPolicy s9 prune rule changed to DeleteAll")
	patch := []byte(`{"spec":{"prune":{"default":"None","rules":[{"when":"policy.spec.remediationAction.lowerAscii() == 'enforce'","behavior":"DeleteAll"}]}}}`)
	Expect(k8s.Patch(ctx, cpol, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	Eventually(publishedDecision).Should(Equal("DeleteAll"))
	Eventually(replicatedPrune).Should(Equal("DeleteAll"), "the replicated Policy does not follow the CleanupPolicy")
	tl.before([]string{"ConfigMap", "=DeleteAll"}, []string{"replicated Policy", "pruneObjectBehavior DeleteAll"})

	By("leaving the root Policy in Git untouched")
	root := &unstructured.Unstructured{}
	root.SetAPIVersion("policy.open-cluster-management.io/v1")
	root.SetKind("Policy")
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: policyNamespace, Name: rootPolicyName}, root)).To(Succeed())
	Expect(templatePrune(root)).To(ContainSubstring("{{hub fromConfigMap"))
}
