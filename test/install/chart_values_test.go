package install_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChartValues checks what each value set changes in the default render.
func TestChartValues(t *testing.T) {
	t.Run("webhook off", func(t *testing.T) {
		r := renderChart(t, valueSets["webhook off"])
		for _, kind := range []string{"ValidatingWebhookConfiguration", "Secret", "Certificate", "Issuer"} {
			if objs := r.ofKind(kind); len(objs) > 0 {
				t.Errorf("with the webhook off the chart renders %s %s", kind, objs[0].name())
			}
		}
		for k := range r {
			if k.Kind == "Service" && k.Name == "cleanup-operator-webhook-service" || k.Name == "cleanup-operator-webhook-cert-role" {
				t.Errorf("with the webhook off the chart renders %v", k)
			}
		}
		d := r.get(t, "Deployment", "cleanup-operator-controller-manager")
		if env := manager(d)["env"]; !slices.ContainsFunc(list(env), func(e any) bool {
			return cmp.Equal(e, map[string]any{"name": "ENABLE_WEBHOOKS", "value": "false"})
		}) {
			t.Errorf("with the webhook off the manager's env should set ENABLE_WEBHOOKS=false: %v", env)
		}
		for _, a := range stringArgs(d) {
			if name := flagName(a); name == "--webhook-cert-path" || name == "--webhook-cert-rotation" {
				t.Errorf("with the webhook off the manager has %s", a)
			}
		}
		if v := d.field("spec", "template", "spec", "volumes"); v != nil {
			t.Errorf("with the webhook off the pods have volumes %v", v)
		}
	})
	t.Run("cert-manager", func(t *testing.T) {
		r := renderChart(t, valueSets["cert-manager"])
		d := r.get(t, "Deployment", "cleanup-operator-controller-manager")
		wantArgs(t, d, map[string]string{"--webhook-cert-rotation": "false"})
		vol := list(d.field("spec", "template", "spec", "volumes"))[0].(map[string]any)
		if name := vol["secret"].(map[string]any)["secretName"]; name != "cleanup-operator-webhook-server-cert" {
			t.Errorf("the certificate volume is Secret %v", name)
		}
		if mount := list(manager(d)["volumeMounts"])[0].(map[string]any); mount["readOnly"] != true {
			t.Errorf("cert-manager's Secret should be mounted read-only: %v", mount)
		}
		cert := r.get(t, "Certificate", "cleanup-operator-webhook-server-cert")
		want := []any{"cleanup-operator-webhook-service.cleanup-operator-system.svc",
			"cleanup-operator-webhook-service.cleanup-operator-system.svc.cluster.local"}
		if diff := cmp.Diff(want, cert.field("spec", "dnsNames")); diff != "" {
			t.Errorf("the Certificate's names (-want +got):\n%s", diff)
		}
		for k := range r {
			if strings.Contains(k.Name, "webhook-cert-role") || strings.Contains(k.Name, "webhook-config-role") {
				t.Errorf("with cert-manager the chart renders the rotation's %v", k)
			}
		}
		vwc := r.get(t, "ValidatingWebhookConfiguration", "cleanup-operator-validating-webhook-configuration")
		if got := vwc.meta()["annotations"]; !cmp.Equal(got, map[string]any{
			"cert-manager.io/inject-ca-from": "cleanup-operator-system/cleanup-operator-webhook-server-cert"}) {
			t.Errorf("the webhook configuration's annotations: %v", got)
		}
	})
	t.Run("another release name", func(t *testing.T) {
		r := renderChart(t, valueSets["another release name"])
		d := r.get(t, "Deployment", "fleet-cleanup-controller-manager")
		if replicas := d.field("spec", "replicas"); replicas != 2.0 {
			t.Errorf("replicas %v, want 2", replicas)
		}
		if issuers := r.ofKind("Issuer"); len(issuers) > 0 {
			t.Errorf("with an issuerRef the chart renders Issuer %s", issuers[0].name())
		}
		ref := r.get(t, "Certificate", "fleet-cleanup-webhook-server-cert").field("spec", "issuerRef")
		if !cmp.Equal(ref, map[string]any{"kind": "ClusterIssuer", "name": "hub-ca"}) {
			t.Errorf("the Certificate's issuerRef is %v", ref)
		}
	})
	t.Run("extraRBAC", func(t *testing.T) {
		role := renderChart(t, valueSets["extraRBAC"]).get(t, "ClusterRole", "cleanup-operator-manager-extra-resources")
		if diff := cmp.Diff(valueSets["extraRBAC"]["extraRBAC"], role["rules"]); diff != "" {
			t.Errorf("the extra role's rules (-values +rendered):\n%s", diff)
		}
	})
	t.Run("no extraRBAC, no flow control, no metrics", func(t *testing.T) {
		r := renderChart(t, valueSets["no extraRBAC, no flow control, no metrics"])
		for k := range r {
			if k.Kind == "FlowSchema" || k.Kind == "PriorityLevelConfiguration" || k.Name == "cleanup-operator-manager-extra-resources" ||
				k.Name == "cleanup-operator-controller-manager-metrics-service" {
				t.Errorf("the chart renders %v", k)
			}
		}
		wantArgs(t, r.get(t, "Deployment", "cleanup-operator-controller-manager"), map[string]string{"--metrics-bind-address": "0"})
	})
	t.Run("metrics over HTTP", func(t *testing.T) {
		r := renderChart(t, valueSets["metrics over HTTP"])
		wantArgs(t, r.get(t, "Deployment", "cleanup-operator-controller-manager"),
			map[string]string{"--metrics-secure": "false", "--metrics-bind-address": ":8080"})
		ep := list(r.get(t, "ServiceMonitor", "cleanup-operator-controller-manager-metrics-monitor").field("spec", "endpoints"))[0]
		if !cmp.Equal(ep, map[string]any{"path": "/metrics", "port": "http", "scheme": "http"}) {
			t.Errorf("the ServiceMonitor's endpoint over HTTP: %v", ep)
		}
	})
}

// manager returns the Deployment's manager container.
func manager(d object) map[string]any {
	return list(d.field("spec", "template", "spec", "containers"))[0].(map[string]any)
}

func flagName(arg string) string {
	name, _, _ := strings.Cut(arg, "=")
	return name
}

// wantArgs checks the manager's flags: each of want with its value, or
// absent where the value is empty.
func wantArgs(t *testing.T, d object, want map[string]string) {
	t.Helper()
	args := stringArgs(d)
	for flag, v := range want {
		got, ok := argValue(args, flag)
		if v == "" && ok || v != "" && got != v {
			t.Errorf("the manager's %s is %q (set: %v), want %q; args %v", flag, got, ok, v, args)
		}
	}
}
