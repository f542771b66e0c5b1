package install_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestReplicasShareOneCertificate starts two managers of config/default at
// once, as two replicas with leader election: both become ready, so the one
// not leading serves the webhook too, and both serve a certificate of the
// one CA that the Secret holds and the webhook configuration trusts, so
// neither replaced the other's; and a cleared caBundle is put back.
func TestReplicasShareOneCertificate(t *testing.T) {
	manager := managerBinary(t)
	objs := kustomize("config/default")(t)
	env := startControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	admin, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	apply(ctx, t, admin, objs)
	d, err := objs.deployment()
	if err != nil {
		t.Fatal(err)
	}
	svc := webhookService(t, objs)
	installedPort := webhookPort(t, d.Spec.Template.Spec.Containers[0])
	webhookEndpoint(ctx, t, admin, svc, installedPort)

	_, other, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	first := launchManager(t, env, manager, objs)
	second := launchManager(t, env, manager, objs, "--webhook-port="+other)
	first.waitReady(ctx, t)
	second.waitReady(ctx, t)

	g := NewWithT(t)
	secret := &corev1.Secret{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: "cleanup-operator-webhook-server-cert"}, secret)).To(Succeed())
	ca := secret.Data["ca.crt"]
	g.Expect(ca).NotTo(BeEmpty())

	vwc := &unstructured.Unstructured{}
	vwc.SetAPIVersion("admissionregistration.k8s.io/v1")
	vwc.SetKind("ValidatingWebhookConfiguration")
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: "cleanup-operator-validating-webhook-configuration"}, vwc)).To(Succeed())
	hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	bundle, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "caBundle")
	g.Expect(bundle).To(Equal(base64.StdEncoding.EncodeToString(ca)), "the caBundle is the Secret's CA")

	// Cleared, the caBundle is put back.
	g.Expect(unstructured.SetNestedField(hooks[0].(map[string]any), "", "clientConfig", "caBundle")).To(Succeed())
	g.Expect(unstructured.SetNestedSlice(vwc.Object, hooks, "webhooks")).To(Succeed())
	g.Expect(admin.Update(ctx, vwc)).To(Succeed())
	g.Eventually(func() string {
		_ = admin.Get(ctx, client.ObjectKeyFromObject(vwc), vwc)
		hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
		bundle, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "caBundle")
		return bundle
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Equal(base64.StdEncoding.EncodeToString(ca)))

	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(ca)).To(BeTrue())
	host := svc.Name + "." + svc.Namespace + ".svc"
	for _, port := range []string{strconv.Itoa(int(installedPort)), other} {
		conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", port), &tls.Config{RootCAs: roots, ServerName: host})
		g.Expect(err).NotTo(HaveOccurred(), "the replica on port %s serves a certificate of the Secret's CA for %s", port, host)
		_ = conn.Close()
	}
}
