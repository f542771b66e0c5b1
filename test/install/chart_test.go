package install_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// valueSets are the values the chart is linted and rendered with besides
// its defaults: every option that adds, removes or changes objects.
var valueSets = map[string]map[string]any{
	"defaults":      nil,
	"webhook off":   {"webhook": map[string]any{"enabled": false}},
	"cert-manager":  {"certificates": map[string]any{"source": "cert-manager"}},
	"monitoring on": monitoringValues,
	"metrics over HTTP": {"metrics": map[string]any{"secure": false, "port": 8080},
		"serviceMonitor": map[string]any{"enabled": true}},
	"extraRBAC": {"extraRBAC": []any{map[string]any{
		"apiGroups": []any{"example.io"}, "resources": []any{"widgets"}, "verbs": []any{"get", "list", "watch", "delete", "patch"}}}},
	"no extraRBAC, no flow control, no metrics": {"extraRBAC": []any{}, "flowControl": map[string]any{"create": false},
		"metrics": map[string]any{"enabled": false}},
	"another release name": {"fullnameOverride": "fleet-cleanup", "replicas": 2,
		"certificates": map[string]any{"source": "cert-manager", "certManager": map[string]any{
			"issuerRef": map[string]any{"kind": "ClusterIssuer", "name": "hub-ca"}}}},
}

var monitoringValues = map[string]any{
	"serviceMonitor":   map[string]any{"enabled": true},
	"prometheusRule":   map[string]any{"enabled": true},
	"grafanaDashboard": map[string]any{"enabled": true},
}

// TestChartLints runs Helm's linter (as `helm lint --strict` does) with the
// defaults and each value set: every message above INFO fails.
func TestChartLints(t *testing.T) {
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			linter := lint.All(chartDir(t), values, releaseNamespace, false)
			for _, m := range linter.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}

// TestChartRefusesBadValues checks that values.schema.json names the field
// of a value the chart cannot use.
func TestChartRefusesBadValues(t *testing.T) {
	cases := map[string]struct {
		values map[string]any
		field  string
	}{
		"unknown source": {map[string]any{"certificates": map[string]any{"source": "vault"}}, "/certificates/source"},
		"misspelt key":   {map[string]any{"webhooks": map[string]any{"enabled": false}}, "webhooks"},
		"port as text":   {map[string]any{"metrics": map[string]any{"port": "8443"}}, "/metrics/port"},
		"arg not a flag": {map[string]any{"extraArgs": []any{"cluster-concurrency=20"}}, "/extraArgs/0"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := renderChartObjects(loadChart(t), c.values)
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("rendering with %v: want an error naming %s, got %v", c.values, c.field, err)
			}
		})
	}
}

// TestChartFilesMatchConfig checks that what the chart embeds from config/
// is what config/ holds (make chart copies them; make manifests runs it),
// and that the chart's appVersion is the Makefile's VERSION.
func TestChartFilesMatchConfig(t *testing.T) {
	copies := map[string]string{
		"config/crd/bases/cleanup.fleetops.dev_cleanuppolicies.yaml": "crds/cleanup.fleetops.dev_cleanuppolicies.yaml",
		"config/rbac/role.yaml":                "files/manager-role.yaml",
		"config/rbac/bootstrap_role.yaml":      "files/bootstrap-role.yaml",
		"config/webhook/manifests.yaml":        "files/webhook-manifests.yaml",
		"config/prometheus/rule.yaml":          "files/prometheus-rule.yaml",
		"config/grafana/cleanup-operator.json": "files/cleanup-operator.json",
	}
	for src, dst := range copies {
		if !bytes.Equal(readFile(t, src), readFile(t, filepath.Join("charts", "cleanup-operator", dst))) {
			t.Errorf("charts/cleanup-operator/%s differs from %s: run 'make chart'", dst, src)
		}
	}
	crds, err := os.ReadDir(filepath.Join(chartDir(t), "crds"))
	if err != nil || len(crds) != 1 {
		t.Errorf("the chart's crds/ should hold the one CRD of config/crd/bases, has %d files (%v)", len(crds), err)
	}
	version := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindSubmatch(readFile(t, "Makefile"))
	if version == nil {
		t.Fatal("no 'VERSION ?=' in the Makefile")
	}
	if got := loadChart(t).Metadata.AppVersion; got != string(version[1]) {
		t.Errorf("Chart.yaml appVersion is %q, the Makefile's VERSION %q: run 'make chart'", got, version[1])
	}
}
