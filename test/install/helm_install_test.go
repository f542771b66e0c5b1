package install_test

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// chartPath is the chart, from this folder.
var chartPath = filepath.Join("..", "..", "charts", "cleanup-operator")

// helmTimeout bounds each Helm action's waits (the CRD's establishment).
const helmTimeout = 2 * time.Minute

// helmInstall installs the chart as release cleanup-operator into namespace
// (created if absent) of the API server restConfig reaches, with values
// over the defaults, as `helm install --create-namespace` does: the CRD of
// crds/ first, then the templates.
func helmInstall(ctx context.Context, restConfig *rest.Config, namespace string, values map[string]any) error {
	cfg, ch, err := helmSetup(restConfig, namespace)
	if err != nil {
		return err
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = releaseName, namespace, true
	install.Timeout = helmTimeout
	if _, err := install.RunWithContext(ctx, ch, values); err != nil {
		return fmt.Errorf("helm install: %w", err)
	}
	return nil
}

// helmUpgrade upgrades the release to the chart with values over the
// defaults, as `helm upgrade` does (it does not touch the CRD).
func helmUpgrade(ctx context.Context, restConfig *rest.Config, namespace string, values map[string]any) error {
	cfg, ch, err := helmSetup(restConfig, namespace)
	if err != nil {
		return err
	}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace, upgrade.Timeout = namespace, helmTimeout
	if _, err := upgrade.RunWithContext(ctx, releaseName, ch, values); err != nil {
		return fmt.Errorf("helm upgrade: %w", err)
	}
	return nil
}

// helmUninstall removes the release, as `helm uninstall` does (the CRD
// stays).
func helmUninstall(restConfig *rest.Config, namespace string) error {
	cfg, err := helmConfig(restConfig, namespace)
	if err != nil {
		return err
	}
	uninstall := action.NewUninstall(cfg)
	uninstall.Timeout = helmTimeout
	if _, err := uninstall.Run(releaseName); err != nil {
		return fmt.Errorf("helm uninstall: %w", err)
	}
	return nil
}

// helmSetup loads the chart and configures Helm for the API server. The
// chart's kubeVersion is checked against the server's version: bin/'s
// kube-apiserver reports the release it is built from (hack/tools/kube/build.sh).
func helmSetup(restConfig *rest.Config, namespace string) (*action.Configuration, *chart.Chart, error) {
	cfg, err := helmConfig(restConfig, namespace)
	if err != nil {
		return nil, nil, err
	}
	ch, err := loader.Load(chartPath)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the chart: %w", err)
	}
	return cfg, ch, nil
}

// helmConfig is Helm's action configuration for the API server of
// restConfig, its releases kept in Secrets of namespace as the helm command
// keeps them.
func helmConfig(restConfig *rest.Config, namespace string) (*action.Configuration, error) {
	getter, err := newRESTGetter(restConfig, namespace)
	if err != nil {
		return nil, err
	}
	cfg := &action.Configuration{}
	if err := cfg.Init(getter, namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("configuring Helm: %w", err)
	}
	return cfg, nil
}

// restGetter gives Helm (genericclioptions.RESTClientGetter) the clients of
// a rest.Config rather than of a kubeconfig file. Its discovery and mapper
// are shared, so that Helm's invalidation after installing the CRD reaches
// the mapper it then uses.
type restGetter struct {
	config    *rest.Config
	namespace string
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.RESTMapper
}

func newRESTGetter(config *rest.Config, namespace string) (*restGetter, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(dc)
	return &restGetter{config: config, namespace: namespace, discovery: cached,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(cached)}, nil
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.config), nil }

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.discovery, nil
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) { return g.mapper, nil }

// ToRawKubeConfigLoader gives the namespace only: the clients come from
// ToRESTConfig.
func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(),
		&clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: g.namespace}})
}
