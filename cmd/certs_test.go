package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// issued returns a certificate and key the way the rotator writes them
// into the Secret.
func issued(t *testing.T, host string) (cert, key []byte) {
	t.Helper()
	r := &rotator.CertRotator{CAName: "test-ca", CAOrganization: "test", DNSName: host,
		ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	now := time.Now()
	ca, err := r.CreateCACert(now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err = r.CreateCertPEM(ca, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// The Secret's certificate is written into the folder and served; an
// empty Secret (not issued yet) writes nothing; a new certificate replaces
// the files and is served at once.
func TestCertFilesWriteAndServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	c := &certFiles{secret: types.NamespacedName{Namespace: "ns", Name: "s"}, dir: dir,
		certName: "tls.crt", keyName: "tls.key", log: logr.Discard()}
	hello := &tls.ClientHelloInfo{}

	if _, err := c.GetCertificate(hello); err == nil {
		t.Fatal("a certificate was served before one was written")
	}
	if err := c.write(ctx, &corev1.Secret{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tls.crt")); !os.IsNotExist(err) {
		t.Fatalf("an empty Secret wrote a certificate file: %v", err)
	}

	for _, host := range []string{"first.ns.svc", "second.ns.svc"} {
		cert, key := issued(t, host)
		s := &corev1.Secret{Data: map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": []byte("ca")}}
		if err := c.write(ctx, s); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || string(got) != string(want) {
				t.Fatalf("%s: %v, or not the Secret's", name, err)
			}
		}
		served, err := c.GetCertificate(hello)
		if err != nil {
			t.Fatal(err)
		}
		if served.Leaf == nil || served.Leaf.DNSNames[0] != host {
			t.Fatalf("served %v, want the certificate for %s", served.Leaf, host)
		}
	}
}
