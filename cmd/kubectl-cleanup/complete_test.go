package main

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// completions are the candidates of a cobra __complete answer, without
// its last line (":<directive>") and the notes cobra writes after it.
func completions(out string) []string {
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, ":") {
			break
		}
		if name, _, _ := strings.Cut(line, "\t"); name != "" {
			got = append(got, name)
		}
	}
	return got
}

// TestCompletionThroughKubectl completes `kubectl cleanup ...` as a shell
// does: kubectl __complete, which runs kubectl_complete-cleanup from PATH,
// which runs the plugin; commands, flags, cluster and record names.
func TestCompletionThroughKubectl(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, c := sharedHub(t)
	for _, name := range []string{"prod-eu", "prod-us", "dev-1"} {
		g.Expect(createCluster(ctx, c, name)).To(Succeed())
	}
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	old := bigRecord("old-1", 1, start)
	_, err := record.Save(ctx, c, record.DefaultNamespace, old, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}})).To(Succeed())
	other := bigRecord("other-1", 2, start)
	_, err = record.Save(ctx, c, "ops", other, nil)
	g.Expect(err).NotTo(HaveOccurred())
	// A ConfigMap that is not a record completes nothing.
	g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "not-a-record"}})).To(Succeed())

	complete := func(args ...string) []string {
		r := run(t, env.Kubeconfig, "kubectl", append([]string{"__complete", "cleanup"}, args...)...)
		g.Expect(r.code).To(Equal(0), r.err)
		return completions(r.out)
	}
	g.Expect(complete("")).To(ContainElements("plan", "status", "history", "confirm-delete", "uninstall", "version"))
	g.Expect(complete("")).NotTo(ContainElement("completion"))
	g.Expect(complete("con")).To(Equal([]string{"confirm-delete"}))
	g.Expect(complete("uninstall", "--sig")).To(Equal([]string{"--signal-works"}))
	g.Expect(complete("status", "-o", "")).To(Equal([]string{"json", "yaml"}))
	g.Expect(complete("plan", "")).To(ConsistOf("prod-eu", "prod-us", "dev-1"))
	g.Expect(complete("confirm-delete", "prod-")).To(ConsistOf("prod-eu", "prod-us"))
	g.Expect(complete("plan", "prod-eu", "")).To(BeEmpty())
	g.Expect(complete("history", "")).To(ConsistOf(old.Name, "old-1"))
	g.Expect(complete("history", "-n", "ops", "")).To(ConsistOf(other.Name, "other-1"))
	g.Expect(complete("history", "--operator-namespace", "ops", "oth")).To(Equal([]string{"other-1"}))
	g.Expect(complete("history", "-n", "o")).To(ContainElement("ops"))
}
