package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// ErrManifestsChanged says that the API server holds another generation of
// a work than the cache: the decision waits for the cache to catch up (the
// work's event brings it back).
var ErrManifestsChanged = errors.New("the work changed since the cache read it")

// withManifestsOf is w with the manifests of live, the same work at the same
// generation.
func withManifestsOf(w, live *workv1.ManifestWork) (*workv1.ManifestWork, error) {
	if live.UID != w.UID || live.Generation != w.Generation {
		return nil, fmt.Errorf("ManifestWork %s/%s: %w (generation %d cached, %d stored)",
			w.Namespace, w.Name, ErrManifestsChanged, w.Generation, live.Generation)
	}
	out := *w
	out.Spec.Workload = live.Spec.Workload
	return &out, nil
}

// ListWithManifests gives each work of a namespace, read from the cache and
// not being deleted, the manifests the API server stores, in one list. It
// returns the works it could not give them (gone, or at another generation
// there), whose events will come; an error when the list fails.
func ListWithManifests(ctx context.Context, apiReader client.Reader, namespace string, works []workv1.ManifestWork) (map[types.UID]error, error) {
	if !slices.ContainsFunc(works, func(w workv1.ManifestWork) bool { return w.DeletionTimestamp == nil }) {
		return nil, nil
	}
	var live workv1.ManifestWorkList
	if err := apiReader.List(ctx, &live, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("reading the manifests of the ManifestWorks in %s: %w", namespace, err)
	}
	byUID := make(map[types.UID]*workv1.ManifestWork, len(live.Items))
	for i := range live.Items {
		byUID[live.Items[i].UID] = &live.Items[i]
	}
	unread := map[types.UID]error{}
	for i := range works {
		w := &works[i]
		if w.DeletionTimestamp != nil {
			continue // not decided again
		}
		l, ok := byUID[w.UID]
		if !ok {
			unread[w.UID] = fmt.Errorf("ManifestWork %s/%s: %w (deleted)", namespace, w.Name, ErrManifestsChanged)
			continue
		}
		full, err := withManifestsOf(w, l)
		if err != nil {
			unread[w.UID] = err
			continue
		}
		*w = *full
	}
	return unread, nil
}
