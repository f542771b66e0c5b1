package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// certRotation is the webhook's serving certificate when the manager
// manages it itself (--webhook-cert-rotation): cert-controller's rotator
// keeps a CA and a serving certificate in the Secret and the CA in the
// ValidatingWebhookConfiguration's caBundle; files copies the Secret's
// certificate into the certificate folder, where the webhook server reads
// it. Every replica runs both, leader or not, so every replica serves.
type certRotation struct {
	secret  types.NamespacedName
	dir     string
	files   *certFiles
	rotator *rotator.CertRotator
}

// newCertRotation prepares the rotation for the flags in namespace ns.
func newCertRotation(f flags, ns string) (*certRotation, error) {
	for flag, v := range map[string]string{"--webhook-secret-name": f.webhookSecretName,
		"--webhook-service-name": f.webhookServiceName, "--webhook-config-name": f.webhookConfigName} {
		if v == "" {
			return nil, fmt.Errorf("%s must be set with --webhook-cert-rotation", flag)
		}
	}
	dir := f.webhookCertPath
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
	}
	secret := types.NamespacedName{Namespace: ns, Name: f.webhookSecretName}
	host := f.webhookServiceName + "." + ns + ".svc"
	files := &certFiles{secret: secret, dir: dir, certName: f.webhookCertName, keyName: f.webhookCertKey}
	return &certRotation{secret: secret, dir: dir, files: files, rotator: &rotator.CertRotator{
		SecretKey:      secret,
		CertDir:        dir,
		CertName:       f.webhookCertName,
		KeyName:        f.webhookCertKey,
		CAName:         "cleanup-operator-webhook-ca",
		CAOrganization: "cleanup-operator",
		DNSName:        host,
		ExtraDNSNames:  []string{host + ".cluster.local"},
		IsReady:        make(chan struct{}),
		Webhooks:       []rotator.WebhookInfo{{Name: f.webhookConfigName, Type: rotator.Validating}},
		// Every replica keeps its files and the caBundle; the Secret's
		// resourceVersion keeps two replicas from both writing a CA.
		RequireLeaderElection: false,
		EnableReadinessCheck:  true,
	}}, nil
}

// add adds the rotator and the file writer to the manager, once the Secret
// is known to exist: the rotator fills it in but does not create it.
func (r *certRotation) add(ctx context.Context, mgr manager.Manager) error {
	if err := mgr.GetAPIReader().Get(ctx, r.secret, &corev1.Secret{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("--webhook-cert-rotation: Secret %s not found: the install creates it empty "+
				"(--webhook-secret-name names it, in the operator's namespace)", r.secret)
		}
		return fmt.Errorf("--webhook-cert-rotation: reading Secret %s: %w", r.secret, err)
	}
	if err := rotator.AddRotator(mgr, r.rotator); err != nil {
		return fmt.Errorf("adding the webhook certificate rotator: %w", err)
	}
	r.files.log = mgr.GetLogger().WithName("webhook-cert")
	r.files.newCache = func() (cache.Cache, error) {
		return cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
			DefaultNamespaces: map[string]cache.Config{r.secret.Namespace: {}},
			ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
				Field: fields.OneTermEqualSelector("metadata.name", r.secret.Name)}}})
	}
	return mgr.Add(r.files)
}

// ready is nil once the certificate is in its folder and the CA in the
// webhook configuration.
func (r *certRotation) ready() error {
	select {
	case <-r.rotator.IsReady:
		return nil
	default:
		return errors.New("the webhook certificate is not in place yet")
	}
}

// certFiles writes the Secret's certificate and key into the certificate
// folder whenever they change, and serves them through a certificate
// watcher from the first write on.
type certFiles struct {
	secret            types.NamespacedName
	dir               string
	certName, keyName string
	log               logr.Logger
	newCache          func() (cache.Cache, error)

	mu      sync.Mutex
	watcher *certwatcher.CertWatcher
}

// NeedLeaderElection is false: every replica serves the webhook.
func (c *certFiles) NeedLeaderElection() bool { return false }

// Start watches the Secret until ctx ends.
func (c *certFiles) Start(ctx context.Context) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("creating the webhook certificate folder: %w", err)
	}
	ch, err := c.newCache()
	if err != nil {
		return err
	}
	inf, err := ch.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return err
	}
	write := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok && s.Name == c.secret.Name {
			if err := c.write(ctx, s); err != nil {
				c.log.Error(err, "writing the webhook certificate", "folder", c.dir)
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: write, UpdateFunc: func(_, obj any) { write(obj) }}); err != nil {
		return err
	}
	return ch.Start(ctx)
}

// write writes the key and then the certificate, each only when it
// changed, through a rename so that a reader never sees half a file.
func (c *certFiles) write(ctx context.Context, s *corev1.Secret) error {
	cert, key := s.Data[c.certName], s.Data[c.keyName]
	if len(cert) == 0 || len(key) == 0 {
		return nil // not issued yet
	}
	changed := false
	for _, f := range []struct {
		name string
		data []byte
	}{{c.keyName, key}, {c.certName, cert}} {
		path := filepath.Join(c.dir, f.name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		tmp := path + ".new"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
		changed = true
	}
	if changed {
		c.log.Info("wrote the webhook certificate", "folder", c.dir, "secret", c.secret.String())
	}
	return c.serve(ctx)
}

// serve starts the certificate watcher once the files exist.
func (c *certFiles) serve(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watcher != nil {
		return c.watcher.ReadCertificate()
	}
	w, err := certwatcher.New(filepath.Join(c.dir, c.certName), filepath.Join(c.dir, c.keyName))
	if err != nil {
		return err
	}
	c.watcher = w
	go func() {
		if err := w.Start(ctx); err != nil {
			c.log.Error(err, "watching the webhook certificate files")
		}
	}()
	return nil
}

// GetCertificate serves the certificate once it has been written.
func (c *certFiles) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	w := c.watcher
	c.mu.Unlock()
	if w == nil {
		return nil, errors.New("the webhook certificate has not been issued yet")
	}
	return w.GetCertificate(hello)
}
