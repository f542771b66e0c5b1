package badinput

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// badCase is one bad value of one CleanupPolicy field.
type badCase struct {
	// name says what is wrong.
	name string
	// spec is the whole spec, in YAML.
	spec string
	// path is the field every refusal and every report must name.
	path string
	// schema says the CRD schema refuses it on its own; otherwise only the
	// webhook refuses it, and without the webhook it is stored, reported
	// on the policy and the clusters the policy governs are held.
	schema bool
	// strict sends it with strict field validation, as kubectl does.
	strict bool
}

const strategy = "removeStrategy: {default: BestEffort}\n"

// repeat writes n YAML list items from a template taking the index.
func repeat(n int, item string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(fmt.Sprintf(item, i))
	}
	return b.String()
}

// catalogue is every field of the spec, with values the operator must
// never act on.
var catalogue = []badCase{
	// clusterSelector
	{name: "selector that does not parse", spec: strategy + `clusterSelector: "cluster.metadata.name =="`, path: "spec.clusterSelector"},
	{name: "selector that is not bool", spec: strategy + `clusterSelector: "cluster.metadata.name"`, path: "spec.clusterSelector"},
	{name: "selector naming an unbound variable", spec: strategy + `clusterSelector: "clustr.metadata.name == 'a'"`, path: "spec.clusterSelector"},
	{name: "selector too long", spec: strategy + `clusterSelector: "` + strings.Repeat("true && ", 512) + `true"`, path: "spec.clusterSelector", schema: true},
	// priority
	{name: "priority that is a word", spec: strategy + `priority: high`, path: "spec.priority", schema: true},
	{name: "priority past int32", spec: strategy + `priority: 2147483648`, path: "spec.priority", schema: true},
	// variables
	{name: "variable name not an identifier", spec: strategy + `variables: [{name: 1st, expression: "1"}]`, path: "spec.variables[0].name", schema: true},
	{name: "variable name empty", spec: strategy + `variables: [{name: "", expression: "1"}]`, path: "spec.variables[0].name", schema: true},
	{name: "variable without a name", spec: strategy + `variables: [{expression: "1"}]`, path: "spec.variables[0].name", schema: true},
	{name: "variable names twice", spec: strategy + `variables: [{name: a, expression: "1"}, {name: a, expression: "2"}]`, path: "spec.variables[1]", schema: true},
	{name: "variable expression empty", spec: strategy + `variables: [{name: a, expression: ""}]`, path: "spec.variables[0].expression", schema: true},
	{name: "variable expression that does not parse", spec: strategy + `variables: [{name: a, expression: "cluster.metadata.name +"}]`, path: "spec.variables[0].expression"},
	{name: "variable reading a later one", spec: strategy + `variables: [{name: a, expression: "variables.b"}, {name: b, expression: "1"}]`, path: "spec.variables[0].expression"},
	{name: "variables past the bound", spec: strategy + "variables:\n" + repeat(33, "- {name: v%d, expression: '1'}\n"), path: "spec.variables", schema: true},
	// removeStrategy
	{name: "no removeStrategy", spec: `priority: 1`, path: "spec.removeStrategy", schema: true},
	{name: "no default strategy", spec: `removeStrategy: {timeout: 5m}`, path: "spec.removeStrategy.default", schema: true},
	{name: "unknown default strategy", spec: `removeStrategy: {default: Sometimes}`, path: "spec.removeStrategy.default", schema: true},
	{name: "unknown rule strategy", spec: `removeStrategy: {default: Required, rules: [{when: "true", strategy: Never}]}`, path: "spec.removeStrategy.rules[0].strategy", schema: true},
	{name: "rule without when", spec: `removeStrategy: {default: Required, rules: [{when: "", strategy: Needless}]}`, path: "spec.removeStrategy.rules[0].when", schema: true},
	{name: "rule naming an undeclared variable", spec: `removeStrategy: {default: Required, rules: [{when: "variables.tier == 'x'", strategy: Needless}]}`, path: "spec.removeStrategy.rules[0].when"},
	{name: "rule that is not bool", spec: `removeStrategy: {default: Required, rules: [{when: "'yes'", strategy: Needless}]}`, path: "spec.removeStrategy.rules[0].when"},
	{name: "rules past the bound", spec: "removeStrategy:\n  default: Required\n  rules:\n" + repeat(33, "  - {when: 'true', strategy: Needless} # %d\n"), path: "spec.removeStrategy.rules", schema: true},
	{name: "timeout that is a word", spec: `removeStrategy: {default: Required, timeout: soon}`, path: "spec.removeStrategy.timeout", schema: true},
	{name: "timeout that is negative", spec: `removeStrategy: {default: Required, timeout: -5m}`, path: "spec.removeStrategy.timeout", schema: true},
	{name: "timeout of zero", spec: `removeStrategy: {default: Required, timeout: 0s}`, path: "spec.removeStrategy.timeout", schema: true},
	{name: "timeout empty", spec: `removeStrategy: {default: Required, timeout: ""}`, path: "spec.removeStrategy.timeout", schema: true},
	{name: "timeout in words", spec: `removeStrategy: {default: Required, timeout: 5 minutes}`, path: "spec.removeStrategy.timeout", schema: true},
	{name: "timeout that is a number", spec: `removeStrategy: {default: Required, timeout: 30}`, path: "spec.removeStrategy.timeout", schema: true},
	{name: "timeout misspelled", spec: `removeStrategy: {default: Required, timout: 5m}`, path: "spec.removeStrategy.timout", schema: true, strict: true},
	// monitoredResources
	{name: "monitored resource without version", spec: strategy + `monitoredResources: [{group: hive.openshift.io, resource: clusterdeployments}]`, path: "spec.monitoredResources[0].version", schema: true},
	{name: "monitored resource empty", spec: strategy + `monitoredResources: [{version: v1, resource: ""}]`, path: "spec.monitoredResources[0].resource", schema: true},
	{name: "monitored resource that is a kind", spec: strategy + `monitoredResources: [{group: hive.openshift.io, version: v1, resource: ClusterDeployment}]`, path: "spec.monitoredResources[0].resource", schema: true},
	{name: "monitored subresource", spec: strategy + `monitoredResources: [{version: v1, resource: pods/status}]`, path: "spec.monitoredResources[0].resource", schema: true},
	{name: "monitored group not a DNS name", spec: strategy + `monitoredResources: [{group: Hive_OpenShift, version: v1, resource: clusterdeployments}]`, path: "spec.monitoredResources[0].group", schema: true},
	{name: "monitored filter that is not bool", spec: strategy + `monitoredResources: [{version: v1, resource: configmaps, when: "object.metadata.name"}]`, path: "spec.monitoredResources[0].when"},
	{name: "monitored resources past the bound", spec: strategy + "monitoredResources:\n" + repeat(33, "- {version: v1, resource: r%d}\n"), path: "spec.monitoredResources", schema: true},
	// deletionStages
	{name: "stage without a name", spec: strategy + `deletionStages: [{version: v1, resource: configmaps}]`, path: "spec.deletionStages[0].name", schema: true},
	{name: "stage name not a DNS label", spec: strategy + `deletionStages: [{name: Add Ons, version: v1, resource: configmaps}]`, path: "spec.deletionStages[0].name", schema: true},
	{name: "stage names twice", spec: strategy + `deletionStages: [{name: a, version: v1, resource: configmaps}, {name: a, version: v1, resource: secrets}]`, path: "spec.deletionStages[1]", schema: true},
	{name: "stage without resource", spec: strategy + `deletionStages: [{name: a, version: v1}]`, path: "spec.deletionStages[0].resource", schema: true},
	{name: "stage version in capitals", spec: strategy + `deletionStages: [{name: a, version: V1, resource: configmaps}]`, path: "spec.deletionStages[0].version", schema: true},
	{name: "stage filter of the wrong type", spec: strategy + `deletionStages: [{name: a, version: v1, resource: configmaps, when: "object.metadata.name.startsWith(1)"}]`, path: "spec.deletionStages[0].when"},
	// keepNamespace
	{name: "keepNamespace that is not bool", spec: strategy + `keepNamespace: "namespace.metadata.labels"`, path: "spec.keepNamespace"},
	{name: "keepNamespace naming an unbound variable", spec: strategy + `keepNamespace: "object.metadata.name == 'a'"`, path: "spec.keepNamespace"},
	// deletionSignal
	{name: "signal work name not a DNS name", spec: strategy + `deletionSignal: {workName: Bad_Name}`, path: "spec.deletionSignal.workName", schema: true},
	{name: "signal work name empty", spec: strategy + `deletionSignal: {workName: ""}`, path: "spec.deletionSignal.workName", schema: true},
	{name: "signal manifest without kind", spec: strategy + `deletionSignal: {manifests: [{apiVersion: v1, metadata: {name: a}}]}`, path: "spec.deletionSignal.manifests[0].kind", schema: true},
	{name: "signal manifest without apiVersion", spec: strategy + `deletionSignal: {manifests: [{kind: ConfigMap, metadata: {name: a}}]}`, path: "spec.deletionSignal.manifests[0].apiVersion", schema: true},
	{name: "signal manifest without name", spec: strategy + `deletionSignal: {manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {namespace: a}}]}`, path: "spec.deletionSignal.manifests[0]", schema: true},
	{name: "signal manifest that is not an object", spec: strategy + `deletionSignal: {manifests: [ConfigMap]}`, path: "spec.deletionSignal.manifests[0]", schema: true},
	{name: "signal manifests past the bound", spec: strategy + "deletionSignal:\n  manifests:\n" + repeat(17, "  - {apiVersion: v1, kind: ConfigMap, metadata: {name: c%d}}\n"), path: "spec.deletionSignal.manifests", schema: true},
	// orphaning
	{name: "orphaning rule without a name", spec: strategy + `orphaning: [{name: "", when: "true"}]`, path: "spec.orphaning[0].name", schema: true},
	{name: "orphaning rule names twice", spec: strategy + `orphaning: [{name: a, when: "true"}, {name: a, when: "false"}]`, path: "spec.orphaning[1]", schema: true},
	{name: "orphaning rule without when", spec: strategy + `orphaning: [{name: a}]`, path: "spec.orphaning[0].when", schema: true},
	{name: "orphaning rule naming an unbound variable", spec: strategy + `orphaning: [{name: a, when: "manfest.kind == 'CustomResourceDefinition'"}]`, path: "spec.orphaning[0].when"},
	// prune
	{name: "unknown prune default", spec: strategy + `prune: {default: Sometimes}`, path: "spec.prune.default", schema: true},
	{name: "unknown prune behaviour", spec: strategy + `prune: {rules: [{when: "true", behavior: All}]}`, path: "spec.prune.rules[0].behavior", schema: true},
	{name: "prune rule without when", spec: strategy + `prune: {rules: [{when: "", behavior: DeleteAll}]}`, path: "spec.prune.rules[0].when", schema: true},
	{name: "prune rule naming an unbound variable", spec: strategy + `prune: {rules: [{when: "polcy.spec.remediationAction == 'enforce'", behavior: DeleteAll}]}`, path: "spec.prune.rules[0].when"},
	// dryRun
	{name: "dryRun that is a word", spec: strategy + `dryRun: "yes"`, path: "spec.dryRun", schema: true},
}

var _ = Describe("Bad input", Ordered, func() {
	BeforeAll(func() {
		if running == nil {
			startManager()
		}
	})

	It("catalogues 40 or more bad values", func() {
		Expect(len(catalogue)).To(BeNumerically(">=", 40))
		names := map[string]bool{}
		for _, c := range catalogue {
			Expect(names[c.name]).To(BeFalse(), "two cases named %q", c.name)
			names[c.name] = true
		}
	})

	// A cluster governed by the policy the cases are written to: its
	// namespace, work and add-on must outlive every case.
	const victim = "victim"
	const target = "catalogue"

	It("governs the victim cluster with a valid policy", func() {
		Expect(createPolicy(target, spec(strategy+`clusterSelector: "cluster.metadata.name == 'victim'"`+"\npriority: 100"))).To(Succeed())
		fleetCluster(victim, nil, nil)
		Eventually(func() map[string]string {
			mc := managedCluster(victim)
			Expect(k8s.Get(ctx, client.ObjectKey{Name: victim}, mc)).To(Succeed())
			return mc.GetAnnotations()
		}).Should(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, target))
	})

	It("with the webhook in the path, refuses every case naming the field", func() {
		for i, c := range catalogue {
			err := createPolicy(fmt.Sprintf("case-%d", i), spec(c.spec), createOptions(c)...)
			Expect(err).To(HaveOccurred(), "case %q was admitted", c.name)
			Expect(err.Error()).To(ContainSubstring(c.path), "case %q", c.name)
		}
		Expect(contentIntact(victim)).To(Succeed())
	})

	It("without the webhook, refuses what the schema refuses and holds on the rest, naming the field", func() {
		webhookOff()
		DeferCleanup(webhookOn)

		// The first case the schema admits makes the policy governing the
		// victim invalid; then the victim is deleted: from here on, any
		// case the operator took for valid would clean it up.
		first := -1
		for i, c := range catalogue {
			if !c.schema {
				first = i
				break
			}
		}
		Expect(first).NotTo(BeNumerically("<", 0))
		Expect(updateSpec(target, catalogue[first])).To(Succeed())
		expectReported(target, victim, catalogue[first], false)
		Expect(k8s.Delete(ctx, managedCluster(victim))).To(Succeed())
		expectReported(target, victim, catalogue[first], true)

		for _, c := range catalogue {
			By(c.name)
			err := updateSpec(target, c)
			if c.schema {
				Expect(err).To(HaveOccurred(), "case %q was admitted by the schema", c.name)
				Expect(err.Error()).To(ContainSubstring(c.path), "case %q", c.name)
				continue
			}
			Expect(err).NotTo(HaveOccurred(), "case %q", c.name)
			expectReported(target, victim, c, true)
		}
		Expect(contentIntact(victim)).To(Succeed())
	})
})

func createOptions(c badCase) []client.CreateOption {
	if c.strict {
		return []client.CreateOption{client.FieldValidation("Strict")}
	}
	return nil
}

// updateSpec replaces the policy's spec with the case's, again when the
// operator changed the policy meanwhile (its in-use finalizer).
func updateSpec(name string, c badCase) error {
	var opts []client.UpdateOption
	if c.strict {
		opts = append(opts, client.FieldValidation("Strict"))
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := cleanupPolicy(name)
		Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, p)).To(Succeed())
		p.Object["spec"] = spec(c.spec)
		return k8s.Update(ctx, p, opts...)
	})
}

// expectReported waits until the policy reports the case's field, and
// until the cluster it governs says it is held naming that field when the
// cluster is being deleted; the cluster's content is all there.
func expectReported(policy, cluster string, c badCase, deleting bool) {
	GinkgoHelper()
	var reported string
	Eventually(func(g Gomega) {
		ready := policyCondition(policy, v1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil(), "the status does not describe the latest generation yet")
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(BeElementOf(v1alpha1.InvalidCELExpressionReason, v1alpha1.InvalidSpecReason))
		g.Expect(ready.Message).To(ContainSubstring(c.path))
		reported = ready.Message
		stalled := policyCondition(policy, v1alpha1.StalledCondition)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed(), "case %q", c.name)
	mc := managedCluster(cluster)
	Expect(k8s.Get(ctx, client.ObjectKey{Name: cluster}, mc)).To(Succeed())
	Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer), "case %q released the cluster", c.name)
	Expect(mc.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, policy), "case %q", c.name)
	if deleting {
		Eventually(func(g Gomega) {
			cond := clusterCondition(cluster)
			g.Expect(cond).NotTo(BeNil())
			// Held before its first write: not begun, for the blast radius.
			g.Expect(cond.Status).To(Equal(metav1.ConditionUnknown))
			g.Expect(cond.Message).To(ContainSubstring("held, nothing is deleted"))
			g.Expect(cond.Message).To(ContainSubstring(c.path))
			// This case's errors, not the previous case's.
			g.Expect(cond.Message).To(HaveSuffix(reported))
		}).Should(Succeed(), "case %q", c.name)
	}
	Expect(contentIntact(cluster)).To(Succeed(), "case %q", c.name)
}
