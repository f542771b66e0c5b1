package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	teardownctl "github.com/fleetops-dev/cleanup-operator/internal/teardown"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/review"
	"github.com/fleetops-dev/cleanup-operator/internal/settings"
)

// policyDoc is a policy of a name governing every cluster, with more of
// its spec (spec.blastRadius) when given.
const policyDoc = `apiVersion: cleanup.fleetops.dev/v1alpha1
kind: CleanupPolicy
metadata: {name: %s}
spec:
  removeStrategy: {default: Required}
%s`

// TestDiffBlastRadius: the operator runs with an operator-wide budget
// (--blast-radius-max-teardowns 2) and records kept 2h; f1's teardown
// began and ended (its record counts it), then, the operator stopped, f2
// and f3 are deleted: today f2 may begin and f3 holds. diff shows a policy
// lowering the budget hold f2, one raising it let f3 go, the same offline
// from a snapshot, and a window longer than the records are kept refused;
// without the operator's settings it warns and takes the defaults. A
// policy applied with a budget, a window, a timeout and a priority diffs
// unchanged against its own file, live and offline.
func TestDiffBlastRadius(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, c := sharedHub(t)
	two := intstr.FromInt32(2)
	running, err := env.StartOperatorWith(ctx, nil, operator.Options{BlastRadius: v1alpha1.BlastRadius{MaxTeardowns: &two},
		Records: teardownctl.RecordOptions{Retention: record.Retention{MaxAge: 2 * time.Hour}}})
	g.Expect(err).NotTo(HaveOccurred())
	// The test stops it half-way; this stops it if the test ends before.
	stopOperator := sync.OnceValue(running.Stop)
	defer func() { g.Expect(stopOperator()).To(Succeed()) }()

	// The operator published its settings.
	g.Eventually(func(g Gomega) {
		s, err := settings.Read(ctx, c, record.DefaultNamespace)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.BlastRadius.MaxTeardowns).To(Equal(&two))
		g.Expect(s.TeardownRecordMaxAge.Duration).To(Equal(2 * time.Hour))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	dir := t.TempDir()
	policyFile := func(file, policy, spec string) string {
		path := filepath.Join(dir, file+".yaml")
		g.Expect(os.WriteFile(path, fmt.Appendf(nil, policyDoc, policy, spec), 0o600)).To(Succeed())
		return path
	}
	file := func(name, spec string) string { return policyFile(name, "fleet", spec) }
	live, lowered, raised := file("live", ""), file("lowered", "  blastRadius: {maxTeardowns: 1}"), file("raised", "  blastRadius: {maxTeardowns: 3}")
	tooLong := file("too-long", "  blastRadius: {window: 3h}")

	// Admission refuses a window longer than the records are kept.
	err = applyFile(ctx, c, tooLong)
	g.Expect(err).To(MatchError(And(ContainSubstring("spec.blastRadius.window"), ContainSubstring("--teardown-record-max-age 2h0m0s"))))
	g.Expect(applyFile(ctx, c, live)).To(Succeed())
	for _, name := range []string{"f1", "f2", "f3", "f4"} {
		g.Expect(createCluster(ctx, c, name)).To(Succeed())
	}
	for _, name := range []string{"f1", "f2", "f3", "f4"} {
		g.Eventually(func(g Gomega) {
			mc := get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: name})
			g.Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
			g.Expect(mc.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, "fleet"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
	g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "f1"))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "f1"}, unstructuredObject(managedClusterGVK, "", "f1")))
	}).WithTimeout(30*time.Second).Should(BeTrue(), "f1 was not torn down")
	started, err := record.StartedUnder(ctx, c, record.DefaultNamespace, "fleet", time.Now().Add(-time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(started).To(HaveLen(1))

	// The operator stops: f2 and f3 are deleted and nothing decides them.
	g.Expect(stopOperator()).To(Succeed())
	// No webhook server answers the dry runs now.
	deleteWebhookConfigurations(ctx, g, c)
	for _, name := range []string{"f2", "f3"} {
		g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", name))).To(Succeed())
	}

	t.Run("today f3 holds under the operator's default budget, counting f1 by its record", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, code := runPlugin(env.Kubeconfig, "plan", "f3")
		g.Expect(code).To(Equal(exitOK), errOut)
		g.Expect(errOut).To(BeEmpty())
		g.Expect(out).To(ContainSubstring("held by the blast radius of CleanupPolicy fleet (maxTeardowns 2 within 1h0m0s): " +
			"3 teardown(s) of its clusters counted within the window: f1, f2, f3"))
		out, _, code = runPlugin(env.Kubeconfig, "plan", "f2")
		g.Expect(code).To(Equal(exitOK))
		g.Expect(out).NotTo(ContainSubstring("held by the blast radius"))
	})

	t.Run("a budget lowered holds f2", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", lowered, "-o", "json")
		g.Expect(code).To(Equal(exitDiffers), errOut)
		g.Expect(errOut).To(BeEmpty())
		r := diffOf(g, out)
		f2 := clusterOf(r, "f2")
		g.Expect(f2).NotTo(BeNil())
		g.Expect(f2.Changes).To(ContainElement("blastRadius"))
		g.Expect(f2.Today.BlastRadius).To(BeEmpty())
		g.Expect(f2.After.BlastRadius).To(HavePrefix("BlastRadiusExceeded: held by the blast radius of CleanupPolicy fleet (maxTeardowns 1 within 1h0m0s)"))
		g.Expect(r.Holds).To(ConsistOf(review.PolicyHolds{Policy: "fleet",
			Today: []string{"f3 (BlastRadiusExceeded)"}, After: []string{"f2 (BlastRadiusExceeded)", "f3 (BlastRadiusExceeded)"}}))
		g.Expect(clusterOf(r, "f4")).To(BeNil(), "a cluster not being deleted is not held")
		text, _, _ := runPlugin(env.Kubeconfig, "diff", "-f", lowered)
		g.Expect(text).To(ContainSubstring("CleanupPolicy fleet: its blast radius holds 1 teardown(s): f3 (BlastRadiusExceeded) today, " +
			"2 teardown(s): f2 (BlastRadiusExceeded), f3 (BlastRadiusExceeded) after\n"))
		g.Expect(text).To(ContainSubstring("ManagedCluster f2\n  blast radius:\n    today: not held by the blast radius\n" +
			"    after: BlastRadiusExceeded: held by the blast radius of CleanupPolicy fleet"))
	})

	t.Run("a budget raised lets f3 go", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", raised, "-o", "json")
		g.Expect(code).To(Equal(exitDiffers), errOut)
		r := diffOf(g, out)
		f3 := clusterOf(r, "f3")
		g.Expect(f3).NotTo(BeNil())
		g.Expect(f3.Today.BlastRadius).To(ContainSubstring("counted within the window: f1, f2, f3"))
		g.Expect(f3.After.BlastRadius).To(BeEmpty())
		g.Expect(clusterOf(r, "f2")).To(BeNil())
		g.Expect(r.Holds).To(ConsistOf(review.PolicyHolds{Policy: "fleet", Today: []string{"f3 (BlastRadiusExceeded)"}, After: []string{}}))
	})

	t.Run("a window longer than the records are kept is refused", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", tooLong)
		g.Expect(code).To(Equal(exitInvalid), out+errOut)
		g.Expect(errOut).To(And(ContainSubstring("spec.blastRadius.window"), ContainSubstring("--teardown-record-max-age 2h0m0s")))
	})

	t.Run("a snapshot answers offline as the hub does live", func(t *testing.T) {
		g := NewWithT(t)
		hub, errOut, code := runPlugin(env.Kubeconfig, "snapshot")
		g.Expect(code).To(Equal(exitOK), errOut)
		g.Expect(hub).To(ContainSubstring(record.StartAnnotation))
		g.Expect(hub).To(ContainSubstring(`"teardownRecordMaxAge": "2h0m0s"`))
		path := filepath.Join(t.TempDir(), "hub.json")
		g.Expect(os.WriteFile(path, []byte(hub), 0o600)).To(Succeed())
		for _, proposed := range []string{lowered, raised, tooLong, live} {
			liveOut, _, liveCode := runPlugin(env.Kubeconfig, "diff", "-f", proposed)
			offline, errOut, offlineCode := runPlugin(filepath.Join(t.TempDir(), "none"), "diff", "-f", proposed, "--snapshot", path)
			g.Expect(offlineCode).To(Equal(liveCode), proposed+": "+errOut)
			g.Expect(offline).To(Equal(liveOut), proposed)
		}
	})

	t.Run("without the operator's settings, a warning and the defaults", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}})).To(Succeed())
		out, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", raised, "-o", "json", "--operator-namespace", "elsewhere")
		g.Expect(code).To(Equal(exitDiffers), errOut)
		g.Expect(errOut).To(ContainSubstring("Warning: the operator's settings could not be read"))
		// No default budget, no record of f1: nothing is held today.
		g.Expect(diffOf(g, out).Holds).To(BeEmpty())
		_, errOut, code = runPlugin(env.Kubeconfig, "plan", "f3", "--operator-namespace", "elsewhere")
		g.Expect(code).To(Equal(exitOK), errOut)
		g.Expect(errOut).To(ContainSubstring("Warning: the operator's settings could not be read"))
	})

	t.Run("a live policy whose window outlasts the records is warned of", func(t *testing.T) {
		g := NewWithT(t)
		// As one admitted before the records' age was lowered (no webhook
		// runs now): it governs no cluster.
		long := policyFile("long", "long", "  clusterSelector: \"false\"\n  blastRadius: {window: 3h}")
		g.Expect(applyFile(ctx, c, long)).To(Succeed())
		_, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", live)
		g.Expect(code).To(Equal(exitOK), errOut)
		g.Expect(errOut).To(ContainSubstring("Warning: CleanupPolicy long: spec.blastRadius.window: Invalid value: \"3h0m0s\": " +
			"longer than the operator keeps teardown records (--teardown-record-max-age 2h0m0s)"))
	})

	t.Run("the file applied, diffed again, is unchanged: numbers and durations as the API server holds them", func(t *testing.T) {
		g := NewWithT(t)
		path := filepath.Join(dir, "br.yaml")
		g.Expect(os.WriteFile(path, []byte(`apiVersion: cleanup.fleetops.dev/v1alpha1
kind: CleanupPolicy
metadata: {name: br}
spec:
  priority: 3
  removeStrategy: {default: Required, timeout: 45m}
  blastRadius: {maxTeardowns: 2, window: 1h, maxConcurrent: 1}
`), 0o600)).To(Succeed())
		g.Expect(applyFile(ctx, c, path)).To(Succeed())
		out, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", path)
		g.Expect(code).To(Equal(exitOK), out+errOut)
		g.Expect(out).To(ContainSubstring("CleanupPolicy br: unchanged\n"))
		g.Expect(out).To(ContainSubstring("0 cluster(s) change"))
		hub, errOut, code := runPlugin(env.Kubeconfig, "snapshot")
		g.Expect(code).To(Equal(exitOK), errOut)
		snapshot := filepath.Join(t.TempDir(), "hub.json")
		g.Expect(os.WriteFile(snapshot, []byte(hub), 0o600)).To(Succeed())
		offline, errOut, code := runPlugin(filepath.Join(t.TempDir(), "none"), "diff", "-f", path, "--snapshot", snapshot)
		g.Expect(code).To(Equal(exitOK), offline+errOut)
		g.Expect(offline).To(Equal(out))
		// A count raised is a change.
		raised := filepath.Join(dir, "br-raised.yaml")
		doc, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.WriteFile(raised, bytes.Replace(doc, []byte("maxTeardowns: 2"), []byte("maxTeardowns: 3"), 1), 0o600)).To(Succeed())
		out, errOut, code = runPlugin(env.Kubeconfig, "diff", "-f", raised)
		g.Expect(code).To(Equal(exitDiffers), out+errOut)
		g.Expect(out).To(ContainSubstring("CleanupPolicy br: changed\n"))
	})
}
