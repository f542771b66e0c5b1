package install_test

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// freeForm are values whose content is Kubernetes' own (resources, security
// contexts, an issuer reference): documented as one row each.
var freeForm = map[string]bool{
	"resources": true, "podSecurityContext": true, "securityContext": true,
	"certificates.certManager.issuerRef": true,
}

// TestValuesDocumented checks that docs/install/helm.md's table has a row
// for every value of values.yaml, and no row for a value that is not there.
func TestValuesDocumented(t *testing.T) {
	var values map[string]any
	if err := yaml.Unmarshal(readFile(t, "charts/cleanup-operator/values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	flatten("", values, keys)
	rows := map[string]bool{}
	for _, line := range strings.Split(string(readFile(t, "docs/install/helm.md")), "\n") {
		if v, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ := strings.Cut(v, "`")
			rows[name] = true
		}
	}
	for k := range keys {
		if !rows[k] {
			t.Errorf("docs/install/helm.md has no row for the value %s", k)
		}
	}
	for r := range rows {
		if !keys[r] {
			t.Errorf("docs/install/helm.md has a row for %s, which values.yaml does not have", r)
		}
	}
}

func flatten(prefix string, v any, out map[string]bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 || freeForm[prefix] {
		out[prefix] = true
		return
	}
	for k, child := range m {
		if prefix != "" {
			k = prefix + "." + k
		}
		flatten(k, child, out)
	}
}
