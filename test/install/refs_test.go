package install_test

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// objects is an install's rendered objects, looked up by kind.
type objects []*unstructured.Unstructured

func (o objects) find(kind, ns, name string) *unstructured.Unstructured {
	for _, u := range o {
		if u.GetKind() == kind && u.GetNamespace() == ns && u.GetName() == name {
			return u
		}
	}
	return nil
}

func (o objects) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range o {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

// deployment is the install's one Deployment, the manager's.
func (o objects) deployment() (*appsv1.Deployment, error) {
	ds := o.ofKind("Deployment")
	if len(ds) != 1 {
		return nil, fmt.Errorf("want one Deployment, found %d", len(ds))
	}
	d := &appsv1.Deployment{}
	return d, runtime.DefaultUnstructuredConverter.FromUnstructured(ds[0].Object, d)
}

// managerFlags reads the flags the manager binary accepts from its -help:
// the name of each, and whether it takes a value.
func managerFlags(manager string) (map[string]bool, error) {
	out, _ := exec.Command(manager, "-help").CombinedOutput() // -help exits 0 or 2
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)( \S+)?`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = m[2] != ""
	}
	if len(flags) < 10 {
		return nil, fmt.Errorf("%s -help lists %d flags:\n%s", manager, len(flags), out)
	}
	return flags, nil
}

// checkReferences returns every reference of the install that does not
// resolve to an object of the install (or, for flags, to the manager).
func checkReferences(o objects, flags map[string]bool) []string {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	d, err := o.deployment()
	if err != nil {
		return []string{err.Error()}
	}
	ns, pod := d.Namespace, d.Spec.Template
	checkPod(o, ns, pod, flags, fail)
	if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(pod.Labels)) {
		fail("Deployment %s: selector %v does not match its pod labels %v", d.Name, d.Spec.Selector.MatchLabels, pod.Labels)
	}
	checkServices(o, pod, fail)
	checkWebhooks(o, fail)
	checkCertificates(o, fail)
	checkBindings(o, fail)
	checkResourceNames(o, fail)
	return errs
}

// checkResourceNames checks that the roles' rules limited to named
// Secrets and webhook configurations name installed ones.
func checkResourceNames(o objects, fail func(string, ...any)) {
	kinds := map[string]string{"secrets": "Secret", "validatingwebhookconfigurations": "ValidatingWebhookConfiguration"}
	for _, role := range append(o.ofKind("Role"), o.ofKind("ClusterRole")...) {
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		for _, r := range rules {
			resources, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
			names, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resourceNames")
			for _, res := range resources {
				kind, ok := kinds[res]
				if !ok {
					continue
				}
				ns := role.GetNamespace()
				if kind == "ValidatingWebhookConfiguration" {
					ns = ""
				}
				for _, name := range names {
					if o.find(kind, ns, name) == nil {
						fail("%s %s: resourceNames names %s %s, which is not installed", role.GetKind(), role.GetName(), kind, name)
					}
				}
			}
		}
	}
}

// checkPod checks the pod's service account, volumes, image and args.
func checkPod(o objects, ns string, pod corev1.PodTemplateSpec, flags map[string]bool, fail func(string, ...any)) {
	if o.find("ServiceAccount", ns, pod.Spec.ServiceAccountName) == nil {
		fail("Deployment: serviceAccountName %s/%s is not installed", ns, pod.Spec.ServiceAccountName)
	}
	volumes := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = true
		switch {
		case v.Secret != nil:
			if o.find("Secret", ns, v.Secret.SecretName) == nil {
				fail("volume %s: Secret %s/%s is not installed", v.Name, ns, v.Secret.SecretName)
			}
		case v.EmptyDir != nil:
		default:
			fail("volume %s: neither a Secret nor an emptyDir", v.Name)
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Image == "" || strings.HasPrefix(c.Image, "controller:") {
			fail("container %s: image %q was not set", c.Name, c.Image)
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				fail("container %s mounts volume %s, which the pod does not have", c.Name, m.Name)
			}
		}
		checkArgs(o, ns, c.Args, flags, fail)
	}
}

// checkArgs checks that every arg is a flag of the manager, and that the
// flags naming objects name installed ones.
func checkArgs(o objects, ns string, args []string, flags map[string]bool, fail func(string, ...any)) {
	names := map[string]string{"webhook-secret-name": "Secret", "webhook-service-name": "Service"}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		takesValue, ok := flags[name]
		if !strings.HasPrefix(args[i], "-") || !ok {
			fail("arg %q is not a flag of the manager", args[i])
			continue
		}
		if takesValue && !hasValue {
			if i+1 == len(args) {
				fail("flag %s has no value", name)
				continue
			}
			i++
			value = args[i]
		}
		if kind, ok := names[name]; ok && o.find(kind, ns, value) == nil {
			fail("--%s=%s: no %s %s/%s is installed", name, value, kind, ns, value)
		}
		if name == "webhook-config-name" && o.find("ValidatingWebhookConfiguration", "", value) == nil {
			fail("--%s=%s: no ValidatingWebhookConfiguration %s is installed", name, value, value)
		}
	}
}

// checkServices checks that every Service selects the manager's pods on a
// port the manager's container declares.
func checkServices(o objects, pod corev1.PodTemplateSpec, fail func(string, ...any)) {
	for _, u := range o.ofKind("Service") {
		svc := &corev1.Service{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, svc); err != nil {
			fail("Service %s: %v", u.GetName(), err)
			continue
		}
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			fail("Service %s: selector %v does not select the manager's pods %v", svc.Name, svc.Spec.Selector, pod.Labels)
		}
		for _, p := range svc.Spec.Ports {
			if !containerPort(pod, p.TargetPort.IntValue(), p.TargetPort.String()) {
				fail("Service %s: targetPort %s is no port of the manager", svc.Name, p.TargetPort.String())
			}
		}
	}
}

func containerPort(pod corev1.PodTemplateSpec, number int, name string) bool {
	for _, c := range pod.Spec.Containers {
		if slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
			return int(p.ContainerPort) == number || p.Name == name
		}) {
			return true
		}
	}
	return false
}

// checkWebhooks checks each webhook's Service and port, and that the CA
// cert-manager injects comes from an installed Certificate.
func checkWebhooks(o objects, fail func(string, ...any)) {
	for _, u := range o.ofKind("ValidatingWebhookConfiguration") {
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for _, h := range hooks {
			svc, _, _ := unstructured.NestedMap(h.(map[string]any), "clientConfig", "service")
			name, _ := svc["name"].(string)
			ns, _ := svc["namespace"].(string)
			port := "443"
			if p, ok := svc["port"]; ok {
				port = fmt.Sprint(p)
			}
			s := o.find("Service", ns, name)
			if s == nil {
				fail("webhook configuration %s: Service %s/%s is not installed", u.GetName(), ns, name)
				continue
			}
			ports, _, _ := unstructured.NestedSlice(s.Object, "spec", "ports")
			if !slices.ContainsFunc(ports, func(p any) bool { return fmt.Sprint(p.(map[string]any)["port"]) == port }) {
				fail("webhook configuration %s: Service %s has no port %s", u.GetName(), name, port)
			}
		}
		if from, ok := u.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			ns, name, _ := strings.Cut(from, "/")
			if o.find("Certificate", ns, name) == nil {
				fail("webhook configuration %s: inject-ca-from %s: no such Certificate", u.GetName(), from)
			}
		}
	}
}

// checkCertificates checks each cert-manager Certificate's issuer, Secret,
// and that it names the webhook Service of its namespace.
func checkCertificates(o objects, fail func(string, ...any)) {
	for _, c := range o.ofKind("Certificate") {
		ns := c.GetNamespace()
		issuer, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "name")
		kind, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "kind")
		if kind == "ClusterIssuer" && o.find(kind, "", issuer) == nil || kind != "ClusterIssuer" && o.find("Issuer", ns, issuer) == nil {
			fail("Certificate %s: issuer %s %s is not installed", c.GetName(), kind, issuer)
		}
		secret, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
		if o.find("Secret", ns, secret) == nil {
			fail("Certificate %s: Secret %s is not the one the install names", c.GetName(), secret)
		}
		dns, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
		for _, host := range webhookHosts(o) {
			if !slices.Contains(dns, host) {
				fail("Certificate %s: dnsNames %v lack the webhook's %s", c.GetName(), dns, host)
			}
		}
	}
}

// checkBindings checks every binding's role and ServiceAccount subjects.
func checkBindings(o objects, fail func(string, ...any)) {
	for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
		for _, b := range o.ofKind(kind) {
			refKind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
			refName, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
			ns := b.GetNamespace()
			if refKind == "ClusterRole" {
				ns = ""
			}
			if o.find(refKind, ns, refName) == nil {
				fail("%s %s: %s %s is not installed", kind, b.GetName(), refKind, refName)
			}
			subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
			for _, s := range subjects {
				m := s.(map[string]any)
				if m["kind"] == "ServiceAccount" && o.find("ServiceAccount", fmt.Sprint(m["namespace"]), fmt.Sprint(m["name"])) == nil {
					fail("%s %s: ServiceAccount %s/%s is not installed", kind, b.GetName(), m["namespace"], m["name"])
				}
			}
		}
	}
	for _, fs := range o.ofKind("FlowSchema") {
		subjects, _, _ := unstructured.NestedSlice(fs.Object, "spec", "rules")
		for _, r := range subjects {
			ss, _, _ := unstructured.NestedSlice(r.(map[string]any), "subjects")
			for _, s := range ss {
				sa, ok, _ := unstructured.NestedMap(s.(map[string]any), "serviceAccount")
				if ok && o.find("ServiceAccount", fmt.Sprint(sa["namespace"]), fmt.Sprint(sa["name"])) == nil {
					fail("FlowSchema %s: ServiceAccount %s/%s is not installed", fs.GetName(), sa["namespace"], sa["name"])
				}
			}
		}
	}
}

// webhookHosts are the names the API server calls the webhooks by.
func webhookHosts(o objects) []string {
	var hosts []string
	for _, u := range o.ofKind("ValidatingWebhookConfiguration") {
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for _, h := range hooks {
			svc, _, _ := unstructured.NestedMap(h.(map[string]any), "clientConfig", "service")
			hosts = append(hosts, fmt.Sprintf("%s.%s.svc", svc["name"], svc["namespace"]))
		}
	}
	return hosts
}
