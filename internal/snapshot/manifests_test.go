package snapshot_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

func TestCompactManifest(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"a ConfigMap keeps its identity", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default","labels":{"x":"y"}},"data":{"payload":"xxxx"}}`,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}`},
		{"cluster-scoped", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"},"spec":{}}`,
			`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}}`},
		{"no metadata", `{"apiVersion":"v1","kind":"ConfigMap","data":{}}`, `{"apiVersion":"v1","kind":"ConfigMap"}`},
		{"metadata not an object stays as it is", `{"kind":"ConfigMap","metadata":"odd","data":{}}`, `{"kind":"ConfigMap","metadata":"odd"}`},
		{"odd field values stay as they are", `{"apiVersion":7,"kind":null,"metadata":{"name":12.5,"namespace":{"x":1}}}`,
			`{"apiVersion":7,"kind":null,"metadata":{"name":12.5,"namespace":{"x":1}}}`},
		{"big numbers stay exact", `{"apiVersion":12345678901234567891,"kind":"X","metadata":{"name":1e400}}`,
			`{"apiVersion":12345678901234567891,"kind":"X","metadata":{"name":1e400}}`},
		{"empty object", `{}`, `{}`},
		{"not an object stays as it is", `["a"]`, `["a"]`},
		{"null stays as it is", `null`, `null`},
		{"invalid JSON stays as it is", `{"kind":`, `{"kind":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(snapshot.CompactManifest([]byte(tc.in)))
			if tc.want == `{"kind":` {
				NewWithT(t).Expect(got).To(Equal(tc.want))
				return
			}
			NewWithT(t).Expect(got).To(MatchJSON(tc.want))
		})
	}
}
