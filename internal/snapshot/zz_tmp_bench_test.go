package snapshot_test

import (
	"strings"
	"testing"

	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

func BenchmarkCompactManifestTmp(b *testing.B) {
	raw := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-1","namespace":"default"},"data":{"payload":"` + strings.Repeat("x", 512) + `"}}`)
	b.ReportAllocs()
	for b.Loop() {
		snapshot.CompactManifest(raw)
	}
}
