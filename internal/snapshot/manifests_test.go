package snapshot_test

import (
	"encoding/json"
	"strings"
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
		{"empty metadata", `{"kind":"X","metadata":{}}`, `{"kind":"X","metadata":{}}`},
		{"null metadata", `{"kind":"X","metadata":null}`, `{"kind":"X","metadata":null}`},
		{"a repeated key: the last one", `{"kind":"A","metadata":{"name":"a"},"kind":"B","metadata":{"namespace":"n"}}`,
			`{"kind":"B","metadata":{"namespace":"n"}}`},
		{"spaces and escapes", ` { "kind" : "A\u0042" , "metadata" : { "name" : "a<b" , "x" : [1, 2] } } `,
			`{"kind":"AB","metadata":{"name":"a<b"}}`},
		{"not an object stays as it is", `["a"]`, `["a"]`},
		{"null stays as it is", `null`, `null`},
		{"invalid JSON stays as it is", `{"kind":`, `{"kind":`},
		{"a stray bracket after the object stays as it is", `{"kind":"A"}}`, `{"kind":"A"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(snapshot.CompactManifest([]byte(tc.in)))
			if !json.Valid([]byte(tc.want)) {
				NewWithT(t).Expect(got).To(Equal(tc.want))
				return
			}
			NewWithT(t).Expect(got).To(MatchJSON(tc.want))
			// The same identity as an unstructured work's manifest keeps.
			var m map[string]any
			d := json.NewDecoder(strings.NewReader(tc.in))
			d.UseNumber()
			if d.Decode(&m) == nil && m != nil {
				want, err := json.Marshal(snapshot.CompactManifestObject(m))
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
				NewWithT(t).Expect(got).To(MatchJSON(want))
			}
		})
	}
}
