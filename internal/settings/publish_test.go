package settings_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/scheme"
	"github.com/fleetops-dev/cleanup-operator/internal/settings"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// TestPublisher: an operator started with other flags replaces the
// settings an earlier one published, and the plugin reads them back; a
// ConfigMap that is not JSON is an error naming it, not the defaults.
func TestPublisher(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := testenv.Start()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(env.Stop()).To(Succeed()) }()
	c, err := client.New(env.Config, client.Options{Scheme: scheme.New()})
	g.Expect(err).NotTo(HaveOccurred())
	ns := record.DefaultNamespace

	_, err = settings.Read(ctx, c, ns)
	g.Expect(err).To(MatchError(settings.ErrNotPublished))
	stale, err := settings.Defaults(ns).ConfigMap()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, stale)).To(Succeed())

	want := settings.Defaults(ns)
	five := intstr.FromString("5%")
	want.BlastRadius.MaxTeardowns = &five
	want.NamespaceDeny = []string{"argocd"}
	want.TeardownRecordMaxAge = metav1.Duration{Duration: 24 * time.Hour}
	p := &settings.Publisher{Client: c, Reader: c, Settings: want}
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	g.Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	got, err := settings.Read(ctx, c, ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
	g.Expect(got.NamespaceDenyList()).To(ContainElements("argocd", ns))

	broken := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(stale), broken)).To(Succeed())
	broken.Data[settings.DataKey] = "not json"
	g.Expect(c.Update(ctx, broken)).To(Succeed())
	_, err = settings.Read(ctx, c, ns)
	g.Expect(err).To(MatchError(ContainSubstring("ConfigMap " + ns + "/" + settings.ConfigMapName + ": " + settings.DataKey)))
}
