package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// bigRecord is the record of a teardown of n works and ten add-ons, each
// with a UID and a time of its own, as the operator writes it.
func bigRecord(cluster string, n int, start time.Time) *record.Record {
	uid := types.UID(fmt.Sprintf("%08x-0000-4000-8000-000000000000", n))
	end := metav1.NewTime(start.Add(time.Hour))
	r := &record.Record{Name: record.Name(cluster, uid, false), Cluster: cluster, UID: uid, Policy: "fleet", PolicyGeneration: 3,
		Strategy: "BestEffort", Start: metav1.NewTime(start), End: &end, Outcome: "Forced", Message: "the hub side was cleaned",
		Signal: &record.Signal{Work: "cleanup-signal", Outcome: record.SignalRemoved}}
	for i := range 10 {
		r.Entries = append(r.Entries, record.Entry{Step: "stage/addons", Action: record.Deleted, State: record.Done,
			Resource: "managedclusteraddons.addon.open-cluster-management.io", Namespace: cluster, Name: fmt.Sprintf("addon-%d", i),
			UID: types.UID(fmt.Sprintf("a%07d-1111-4000-8000-%012d", i, i)), Time: metav1.NewTime(start.Add(time.Duration(i) * time.Millisecond))})
	}
	for i := range n {
		e := record.Entry{Step: "stage/manifestworks", Action: record.Deleted, State: record.Done,
			Resource: "manifestworks.work.open-cluster-management.io", Namespace: cluster, Name: fmt.Sprintf("app-%05d", i),
			UID:  types.UID(fmt.Sprintf("%08x-2222-4%03x-8%03x-%012x", i*7919, i%4096, (i*31)%4096, i*104729)),
			Time: metav1.NewTime(start.Add(time.Second + time.Duration(i)*37*time.Millisecond))}
		if i%3 == 0 {
			e.DeleteOption = "SelectivelyOrphan (2 manifest(s))"
		}
		if i%10 == 0 {
			r.Entries = append(r.Entries, record.Entry{Step: "stage/manifestworks", Action: record.Forced, State: record.Done,
				Resource: e.Resource, Namespace: cluster, Name: e.Name, UID: e.UID, Finalizers: []string{"cluster.open-cluster-management.io/manifest-work-cleanup"},
				Time: e.Time})
		}
		r.Entries = append(r.Entries, e)
	}
	r.Entries = append(r.Entries, record.Entry{Step: "namespace", Action: record.Deleted, State: record.Done, Resource: "namespaces",
		Name: cluster, UID: "ns-uid", Time: end})
	return r
}

// TestHistoryOfALargeTeardown stores the record of a 5,000-work teardown
// through the API server, checks it stays under the ConfigMap size limit
// whole, and prints it with `kubectl cleanup history`, as a table and as
// JSON and YAML; the timing is printed, not asserted.
func TestHistoryOfALargeTeardown(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, c := sharedHub(t)
	kubeconfig := env.Kubeconfig

	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	big := bigRecord("big-1", 5000, start)
	cm, err := record.Save(ctx, c, record.DefaultNamespace, big, nil)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("a record of %d entries is stored in %d bytes (gzip), the limit being 1 MiB", len(big.Entries), record.Size(cm))
	g.Expect(record.Size(cm)).To(BeNumerically("<", record.MaxPayload))
	g.Expect(cm.BinaryData).To(HaveKey(record.GzipKey))
	small := bigRecord("small-1", 3, start.Add(time.Hour))
	_, err = record.Save(ctx, c, record.DefaultNamespace, small, nil)
	g.Expect(err).NotTo(HaveOccurred())

	began := time.Now()
	out, err := kubectlCleanup(t, kubeconfig, "history", "big-1")
	took := time.Since(began)
	g.Expect(err).NotTo(HaveOccurred(), out)
	t.Logf("kubectl cleanup history big-1 printed %d lines in %v", strings.Count(out, "\n"), took)
	g.Expect(out).To(ContainSubstring("Teardown of ManagedCluster big-1"))
	g.Expect(out).To(ContainSubstring("Policy:    fleet (generation 3), strategy BestEffort"))
	g.Expect(out).To(ContainSubstring("Objects:   5011 deleted, 500 forced"))
	g.Expect(out).To(ContainSubstring("Signal:    cleanup-signal: removed"))
	g.Expect(out).To(MatchRegexp(`stage/manifestworks\s+deleted\s+done\s+manifestworks/app-04999\s+`))
	g.Expect(out).To(MatchRegexp(`stage/manifestworks\s+forced\s+done\s+manifestworks/app-04990\s+finalizers removed: cluster.open-cluster-management.io/manifest-work-cleanup`))
	g.Expect(out).To(MatchRegexp(`namespace\s+deleted\s+done\s+namespaces/big-1`))
	// One line per entry, after the header and the table's.
	g.Expect(strings.Count(out, "\n")).To(BeNumerically(">=", len(big.Entries)+1))

	// By its record name, as JSON: every entry, in order.
	out, err = kubectlCleanup(t, kubeconfig, "history", big.Name, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var got record.Record
	g.Expect(json.Unmarshal([]byte(out), &got)).To(Succeed())
	g.Expect(got.Entries).To(HaveLen(len(big.Entries)))
	g.Expect(got.Entries[len(got.Entries)-1].Name).To(Equal("big-1"))
	g.Expect(got.Summary).To(BeNil())

	// The list: the newest first.
	out, err = kubectlCleanup(t, kubeconfig, "history")
	g.Expect(err).NotTo(HaveOccurred(), out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	g.Expect(lines).To(HaveLen(3))
	g.Expect(lines[0]).To(MatchRegexp(`^CLUSTER\s+RECORD\s+POLICY`))
	g.Expect(lines[1]).To(MatchRegexp(`^small-1\s+teardown-small-1-`))
	g.Expect(lines[2]).To(MatchRegexp(`^big-1\s+teardown-big-1-\S+\s+fleet\s+BestEffort\s+.*\s+60m\s+Forced\s+5011\s+0\s+500\s+0\s+0$`))
	out, err = kubectlCleanup(t, kubeconfig, "history", "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var list []map[string]any
	g.Expect(yaml.Unmarshal([]byte(out), &list)).To(Succeed())
	g.Expect(list).To(HaveLen(2))
	g.Expect(list[1]).To(HaveKeyWithValue("cluster", "big-1"))

	// Another namespace, by flag or POD_NAMESPACE.
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}})).To(Succeed())
	_, err = record.Save(ctx, c, "ops", bigRecord("elsewhere", 1, start), nil)
	g.Expect(err).NotTo(HaveOccurred())
	out, err = kubectlCleanup(t, kubeconfig, "history", "--operator-namespace", "ops")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("elsewhere"))
	g.Expect(out).NotTo(ContainSubstring("big-1"))
	t.Setenv("POD_NAMESPACE", "ops")
	out, err = kubectlCleanup(t, kubeconfig, "history", "elsewhere")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Teardown of ManagedCluster elsewhere"))

	out, err = kubectlCleanup(t, kubeconfig, "history", "nowhere")
	g.Expect(err).To(MatchError(ContainSubstring("no teardown record of cluster nowhere")), out)
}
