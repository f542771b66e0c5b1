package main

import "fmt"

// Kinds a registry+v1 bundle may carry besides the CSV and CRDs, with
// whether they are namespaced. The tests check this list against
// operator-registry's; the generator does not import operator-registry so
// that `make bundle` builds quickly.
var bundleKinds = map[string]bool{
	"ClusterRole":           false,
	"ClusterRoleBinding":    false,
	"ConfigMap":             true,
	"ConsoleCLIDownload":    false,
	"ConsoleLink":           false,
	"ConsolePlugin":         false,
	"ConsoleQuickStart":     false,
	"ConsoleYAMLSample":     false,
	"NetworkPolicy":         true,
	"PodDisruptionBudget":   true,
	"PodMonitor":            true,
	"PriorityClass":         false,
	"PrometheusRule":        true,
	"Role":                  true,
	"RoleBinding":           true,
	"Secret":                true,
	"Service":               true,
	"ServiceAccount":        true,
	"ServiceMonitor":        true,
	"VerticalPodAutoscaler": false,
}

// leftOutKinds are kinds config/manifests builds that a bundle cannot carry
// or that OLM provides itself, keyed by group/kind.
var leftOutKinds = map[string]string{
	"/Namespace": "OLM installs the operator into the namespace of the OperatorGroup",
	"cert-manager.io/Issuer": "OLM issues the webhook serving certificate and mounts it at " +
		"/tmp/k8s-webhook-server/serving-certs (tls.crt, tls.key)",
	"cert-manager.io/Certificate": "OLM issues the webhook serving certificate and mounts it at " +
		"/tmp/k8s-webhook-server/serving-certs (tls.crt, tls.key)",
	"admissionregistration.k8s.io/ValidatingAdmissionPolicy": "a bundle cannot carry this kind; " +
		"the operator creates it at start (internal/admissionpolicy), as its cluster permissions allow",
	"admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": "a bundle cannot carry this kind; " +
		"the operator creates it at start (internal/admissionpolicy), as its cluster permissions allow",
	"flowcontrol.apiserver.k8s.io/FlowSchema": "a bundle cannot carry this kind; " +
		"the operator creates it at start for its service account (internal/flowcontrol), as its cluster permissions allow",
	"flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration": "a bundle cannot carry this kind; " +
		"the operator creates it at start (internal/flowcontrol), as its cluster permissions allow",
}

// rest places every object not placed yet: a manifest of its own when a
// bundle can carry its kind, left out with a reason when OLM provides it or
// cannot carry it, and an error otherwise, so that a new kind in
// config/manifests is a decision, not a surprise.
func (g *generator) rest() error {
	for _, u := range g.objs {
		key := objectKey(u)
		if g.done[key] {
			continue
		}
		gk := u.GroupVersionKind().Group + "/" + u.GetKind()
		if gk == "/Secret" && g.certSecrets()[u.GetNamespace()+"/"+u.GetName()] {
			g.bundle.LeftOut = append(g.bundle.LeftOut, Note{key, "the webhook certificate's Secret: " + leftOutKinds["cert-manager.io/Certificate"]})
			continue
		}
		if reason, ok := leftOutKinds[gk]; ok {
			g.bundle.LeftOut = append(g.bundle.LeftOut, Note{key, reason})
			continue
		}
		namespaced, ok := bundleKinds[u.GetKind()]
		if !ok {
			return fmt.Errorf("%s: a bundle cannot carry kind %s; remove it from %s or list it in leftOutKinds with the reason", key, gk, ManifestsSource)
		}
		if err := g.addManifest(manifestFileName(u), withoutNamespace(u, namespaced)); err != nil {
			return err
		}
	}
	return nil
}
