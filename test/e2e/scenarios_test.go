package e2e

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
)

// The scenarios, in one container so they run in this order. Each starts
// from no cluster and no policy, joins cluster1, and leaves the fleet as it
// found it. OCM's registration hub runs on its default feature gates
// (ResourceCleanup on) for every scenario but 4b, which restarts it with
// the gate off and back on.
var _ = Describe("cleanup-operator with OCM's hub, work agent and propagator", func() {
	BeforeEach(func() { DeferCleanup(resetFleet) })

	Context("deleting a ManifestWork", func() {
		It("1. with no orphaning rule, deletes its ConfigMap and Deployment on the managed cluster", scenarioForeground)
		It("2. with an orphaning rule for the ConfigMap, keeps the ConfigMap and deletes the Deployment", scenarioOrphanConfigMap)
		It("3. with an orphaning rule for the whole work, keeps everything", scenarioOrphanWork)
	})

	Context("deleting a ManagedCluster", func() {
		It("4. under Required, deletes add-ons then works in stage and priority order, then the namespace, then lets the cluster go", scenarioRequired)
		It("5. under Needless, cleans the hub and leaves everything on the managed cluster", scenarioNeedless)
		// 5b and 6b: the operator deletes a work it gave deleteOption Orphan
		// only once the work agent applied it; before that the agent would
		// delete the work's objects (see the functions).
		It("5b. under Needless, keeps everything when the work agent was away while the works were orphaned", scenarioNeedlessAgentRestart)
		It("5c. under Needless, keeps everything although an orphaning rule had narrowed the work to SelectivelyOrphan", scenarioNeedlessOverRules)
		It("5d. under Needless, after the operator was down past the timeout, waits for the agent to apply the Orphan", scenarioNeedlessOperatorDown)
		It("6. waits for the deletion signal while an in-cluster controller's finalizer holds it", scenarioSignal)
		It("7. waits while a monitored resource remains, and deletes none of them", scenarioMonitored)
		It("7b. holds OCM's gc on a governed cluster while a monitored resource remains, then tears it down in the policy's order and OCM lets it go within seconds; OCM's gc alone cleans up a cluster no policy governs", scenarioOCMHeld)
		It("8a. with the work agent stopped and the cluster unavailable, under Required, reports and waits until the agent is back", scenarioRequiredAgentDown)
		It("8b. with the work agent stopped, under BestEffort, forces the hub clean after the timeout", scenarioBestEffortTimeout)
		It("8c. with the cluster unavailable, under BestEffort, forces the hub clean at once", scenarioBestEffortUnavailable)
	})

	Context("with OCM's ResourceCleanup gate off", func() {
		It("4b. under Required, the operator alone tears the cluster down in its order and the cluster goes", withResourceCleanupOff(scenarioRequiredGateOff))
	})

	Context("guard rails", func() {
		It("10. holds a cleanup while pre-cleanup hooks remain, past its timeout, and forces nothing once they go", scenarioHooks)
		It("11. writes nothing for a suspended policy's deleted cluster and works, and cleans up once resumed", scenarioSuspend)
		It("12. refuses kubectl delete and a stale confirmation of a protected cluster; confirmed with kubectl cleanup confirm-delete, deletes and cleans up", scenarioProtection)
		It("13. in a burst of deletions past its policy's blast radius, lets the first go and holds cluster1, its workloads on the managed cluster, until kubectl cleanup release", scenarioBlastRadius)
	})

	Context("releasing a ManagedCluster", func() {
		It("6b. retires the signal work of a cluster no policy governs, leaving the signal object", scenarioSignalRetired)
	})

	Context("prune decisions for Policies", func() {
		It("9. reach the replicated Policy through the propagator's hub template, and follow the CleanupPolicy", scenarioPrune)
	})
})

// policyYAML is a CleanupPolicy governing cluster1 while it carries the
// scenario's label; spec holds the rest of the spec, indented two spaces.
func policyYAML(name, scenario, spec string) string {
	return fmt.Sprintf(`apiVersion: cleanup.fleetops.dev/v1alpha1
kind: CleanupPolicy
metadata:
  name: %s
spec:
  clusterSelector: "cluster.metadata.labels[?'%s'].orValue('') == '%s'"
%s`, name, scenarioLabel, scenario, indent(spec))
}

func indent(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n") + "\n"
}
