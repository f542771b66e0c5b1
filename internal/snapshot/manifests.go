package snapshot

import (
	"bytes"
	"encoding/json"

	kjson "sigs.k8s.io/json"

	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// CompactManifest is what the operator's cache keeps of a manifest of a
// ManifestWork: its identity (cel.ManifestIdentity), which names the object
// an orphaned manifest leaves. A manifest that is not a JSON object is kept
// as it is, so that a decision still finds it invalid. Only the identity is
// decoded, the rest skipped, and its values are kept as they are written
// (a number exactly); field names match exactly, as the API server's do.
func CompactManifest(raw []byte) []byte {
	var m manifestIdentity
	if !isObject(raw) || kjson.UnmarshalCaseSensitivePreserveInts(raw, &m) != nil {
		return raw
	}
	if isObject(m.Metadata) {
		var meta metadataIdentity
		if kjson.UnmarshalCaseSensitivePreserveInts(m.Metadata, &meta) != nil {
			return raw
		}
		if m.Metadata, _ = json.Marshal(meta); m.Metadata == nil {
			return raw
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// manifestIdentity and metadataIdentity are cel.ManifestIdentity, each
// value as it is written; a field absent stays absent.
type manifestIdentity struct {
	APIVersion json.RawMessage `json:"apiVersion,omitempty"`
	Kind       json.RawMessage `json:"kind,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

type metadataIdentity struct {
	Name      json.RawMessage `json:"name,omitempty"`
	Namespace json.RawMessage `json:"namespace,omitempty"`
}

// isObject says whether raw holds a JSON object (its first byte past any
// space opens one).
func isObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// CompactManifestObject is CompactManifest of a decoded manifest.
func CompactManifestObject(m map[string]any) map[string]any {
	out := map[string]any{}
	for _, path := range cel.ManifestIdentity {
		src, dst := m, out
		for i, name := range path {
			v, ok := src[name]
			if !ok {
				break
			}
			if i == len(path)-1 {
				dst[name] = v
				break
			}
			next, ok := v.(map[string]any)
			if !ok {
				// Not an object where the identity has one: kept as it
				// is, so that a decision reads what the API server stores.
				dst[name] = v
				break
			}
			if _, ok := dst[name].(map[string]any); !ok {
				dst[name] = map[string]any{}
			}
			src, dst = next, dst[name].(map[string]any)
		}
	}
	return out
}
