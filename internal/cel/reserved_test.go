package cel

import "testing"

func TestRenameNamespace(t *testing.T) {
	cases := map[string]string{
		"namespace.metadata.name == 'a'":                   "ns_object.metadata.name == 'a'",
		"object.metadata.namespace == 'a'":                 "object.metadata.namespace == 'a'",
		"object.metadata . namespace == 'a'":               "object.metadata . namespace == 'a'",
		"'namespace' == namespace.metadata.name":           "'namespace' == ns_object.metadata.name",
		`"it's namespace" + r'namespace\' == "x"`:          `"it's namespace" + r'namespace\' == "x"`,
		"'''a ' namespace''' == namespace.kind":            "'''a ' namespace''' == ns_object.kind",
		"mynamespace || namespaces || namespace_x":         "mynamespace || namespaces || namespace_x",
		"[namespace].all(n, n.kind == 'Namespace')":        "[ns_object].all(n, n.kind == 'Namespace')",
		"true // namespace\n&& namespace.kind != ''":       "true // namespace\n&& ns_object.kind != ''",
		"cluster.metadata.labels[?'namespace'].hasValue()": "cluster.metadata.labels[?'namespace'].hasValue()",
	}
	for in, want := range cases {
		if got := renameNamespace(in); got != want {
			t.Errorf("renameNamespace(%q) = %q, want %q", in, got, want)
		}
		if len(renameNamespace(in)) != len(in) {
			t.Errorf("renameNamespace(%q) changed the length", in)
		}
	}
}
