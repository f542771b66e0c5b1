package install_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestChartReferencesResolve renders each value set and checks that every
// name an object gives of another is an object of the render (or, for a
// ClusterIssuer, the cluster's): bindings' roles and subjects, the pods'
// service account, the Services' selectors and ports, the webhook's
// Service, the certificate's issuer, Secret and CA injection, the
// manager's certificate flags and the roles they need, the FlowSchema's
// subject and level, the ServiceMonitor's Service and port.
func TestChartReferencesResolve(t *testing.T) {
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			r := renderChart(t, values)
			deploys := r.ofKind("Deployment")
			if len(deploys) != 1 {
				t.Fatalf("%d Deployments, want 1", len(deploys))
			}
			d := deploys[0]
			for _, err := range slices.Concat(bindingErrors(r), serviceErrors(r, d), webhookErrors(r, d), monitorErrors(r)) {
				t.Error(err)
			}
		})
	}
}

// has tells whether the render has an object of the kind and name, in ns
// or cluster-scoped.
func (r render) has(kind, ns, name string) bool {
	_, ok := r[key{kind, ns, name}]
	return ok
}

func str(v any) string { s, _ := v.(string); return s }

func list(v any) []any { l, _ := v.([]any); return l }

func bindingErrors(r render) []error {
	var errs []error
	for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
		for _, b := range r.ofKind(kind) {
			ref := b["roleRef"].(map[string]any)
			ns := b.namespace()
			if ref["kind"] == "ClusterRole" {
				ns = ""
			}
			if !r.has(str(ref["kind"]), ns, str(ref["name"])) {
				errs = append(errs, fmt.Errorf("%s %s: no %s %s", kind, b.name(), ref["kind"], ref["name"]))
			}
			errs = append(errs, subjectErrors(r, kind+" "+b.name(), list(b["subjects"]))...)
		}
	}
	for _, fs := range r.ofKind("FlowSchema") {
		for _, rule := range list(fs.field("spec", "rules")) {
			for _, s := range list(rule.(map[string]any)["subjects"]) {
				sa := s.(map[string]any)["serviceAccount"].(map[string]any)
				if !r.has("ServiceAccount", str(sa["namespace"]), str(sa["name"])) {
					errs = append(errs, fmt.Errorf("FlowSchema %s: no ServiceAccount %s/%s", fs.name(), sa["namespace"], sa["name"]))
				}
			}
		}
		if level := str(fs.field("spec", "priorityLevelConfiguration", "name")); !r.has("PriorityLevelConfiguration", "", level) {
			errs = append(errs, fmt.Errorf("FlowSchema %s: no PriorityLevelConfiguration %s", fs.name(), level))
		}
	}
	return errs
}

func subjectErrors(r render, what string, subjects []any) []error {
	var errs []error
	for _, s := range subjects {
		s := s.(map[string]any)
		if !r.has("ServiceAccount", str(s["namespace"]), str(s["name"])) {
			errs = append(errs, fmt.Errorf("%s: no ServiceAccount %s/%s", what, s["namespace"], s["name"]))
		}
	}
	return errs
}

// serviceErrors checks the pods' service account and that each Service
// selects the pods on a port their container serves.
func serviceErrors(r render, d object) []error {
	var errs []error
	pod := d.field("spec", "template", "spec").(map[string]any)
	if sa := str(pod["serviceAccountName"]); !r.has("ServiceAccount", d.namespace(), sa) {
		errs = append(errs, fmt.Errorf("Deployment: no ServiceAccount %s", sa))
	}
	podLabels := d.field("spec", "template", "metadata", "labels").(map[string]any)
	if !subset(d.field("spec", "selector", "matchLabels"), podLabels) {
		errs = append(errs, fmt.Errorf("Deployment: its selector does not select its pods"))
	}
	ports := map[float64]bool{}
	for _, p := range list(pod["containers"].([]any)[0].(map[string]any)["ports"]) {
		ports[p.(map[string]any)["containerPort"].(float64)] = true
	}
	for _, s := range r.ofKind("Service") {
		if !subset(s.field("spec", "selector"), podLabels) {
			errs = append(errs, fmt.Errorf("Service %s selects no manager pod", s.name()))
		}
		for _, p := range list(s.field("spec", "ports")) {
			if target := p.(map[string]any)["targetPort"]; !ports[target.(float64)] {
				errs = append(errs, fmt.Errorf("Service %s: port %v is not a container port", s.name(), target))
			}
		}
	}
	return errs
}

func subset(small, big any) bool {
	s, _ := small.(map[string]any)
	b, _ := big.(map[string]any)
	for k, v := range s {
		if b[k] != v {
			return false
		}
	}
	return len(s) > 0
}

// webhookErrors checks the webhook's Service, the certificate flags, and
// the objects the certificate source needs.
func webhookErrors(r render, d object) []error {
	var errs []error
	ns := d.namespace()
	for _, vwc := range r.ofKind("ValidatingWebhookConfiguration") {
		for _, w := range list(vwc["webhooks"]) {
			svc := w.(map[string]any)["clientConfig"].(map[string]any)["service"].(map[string]any)
			if !r.has("Service", str(svc["namespace"]), str(svc["name"])) {
				errs = append(errs, fmt.Errorf("webhook %v: no Service %s/%s", w.(map[string]any)["name"], svc["namespace"], svc["name"]))
			}
		}
		annotations, _ := vwc.meta()["annotations"].(map[string]any)
		if from, ok := annotations["cert-manager.io/inject-ca-from"]; ok {
			certNS, cert, _ := strings.Cut(str(from), "/")
			if !r.has("Certificate", certNS, cert) {
				errs = append(errs, fmt.Errorf("ValidatingWebhookConfiguration: inject-ca-from names no Certificate %s", from))
			}
		}
	}
	for _, c := range r.ofKind("Certificate") {
		ref := c.field("spec", "issuerRef").(map[string]any)
		if ref["kind"] != "ClusterIssuer" && !r.has("Issuer", ns, str(ref["name"])) {
			errs = append(errs, fmt.Errorf("Certificate %s: no Issuer %s", c.name(), ref["name"]))
		}
	}
	args := stringArgs(d)
	for _, v := range list(d.field("spec", "template", "spec", "volumes")) {
		if secret, ok := v.(map[string]any)["secret"].(map[string]any); ok && !secretIssued(r, ns, str(secret["secretName"])) {
			errs = append(errs, fmt.Errorf("Deployment: no Secret or Certificate for volume secret %s", secret["secretName"]))
		}
	}
	if v, _ := argValue(args, "--webhook-cert-rotation"); v == "true" {
		errs = append(errs, rotationErrors(r, ns, args)...)
	}
	return errs
}

func secretIssued(r render, ns, name string) bool {
	for _, c := range r.ofKind("Certificate") {
		if c.namespace() == ns && c.field("spec", "secretName") == name {
			return true
		}
	}
	return r.has("Secret", ns, name)
}

// rotationErrors checks that the objects the certificate flags name exist
// and that the manager may update them.
func rotationErrors(r render, ns string, args []string) []error {
	var errs []error
	secret, _ := argValue(args, "--webhook-secret-name")
	service, _ := argValue(args, "--webhook-service-name")
	config, _ := argValue(args, "--webhook-config-name")
	for _, ref := range []key{{"Secret", ns, secret}, {"Service", ns, service}, {"ValidatingWebhookConfiguration", "", config}} {
		if !r.has(ref.Kind, ref.Namespace, ref.Name) {
			errs = append(errs, fmt.Errorf("the certificate flags name %s %q, which the chart does not render", ref.Kind, ref.Name))
		}
	}
	if !granted(r, "Role", "secrets", secret, "update") {
		errs = append(errs, fmt.Errorf("no Role lets the manager update Secret %s", secret))
	}
	if !granted(r, "ClusterRole", "validatingwebhookconfigurations", config, "update") {
		errs = append(errs, fmt.Errorf("no ClusterRole lets the manager update ValidatingWebhookConfiguration %s", config))
	}
	return errs
}

// granted tells whether a role of the kind grants verb on the named object.
func granted(r render, kind, resource, name, verb string) bool {
	for _, role := range r.ofKind(kind) {
		for _, rule := range list(role["rules"]) {
			rule := rule.(map[string]any)
			names := list(rule["resourceNames"])
			if slices.Contains(list(rule["resources"]), any(resource)) && slices.Contains(list(rule["verbs"]), any(verb)) &&
				(len(names) == 0 || slices.Contains(names, any(name))) {
				return true
			}
		}
	}
	return false
}

// monitorErrors checks that each ServiceMonitor selects a Service by a
// port name it has.
func monitorErrors(r render) []error {
	var errs []error
	for _, m := range r.ofKind("ServiceMonitor") {
		port := str(list(m.field("spec", "endpoints"))[0].(map[string]any)["port"])
		found := false
		for _, s := range r.ofKind("Service") {
			for _, p := range list(s.field("spec", "ports")) {
				found = found || (subset(m.field("spec", "selector", "matchLabels"), s.meta()["labels"]) && p.(map[string]any)["name"] == port)
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("ServiceMonitor %s selects no Service with a port %q", m.name(), port))
		}
	}
	return errs
}

func stringArgs(d object) []string {
	return toStrings(list(d.field("spec", "template", "spec", "containers"))[0].(map[string]any)["args"])
}
