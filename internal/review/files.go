package review

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// Read reads the CleanupPolicies of files and directories (recursively,
// the .yaml, .yml and .json files), each file one or more YAML or JSON
// documents, a List's items included. The notes name the other objects,
// which are ignored.
func Read(paths []string) (policies []*unstructured.Unstructured, notes []string, err error) {
	seen := map[string]string{}
	for _, root := range paths {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir():
				return nil
			case path != root && !manifestFile(path):
				return nil
			}
			objs, err := readFile(path)
			if err != nil {
				return err
			}
			for _, u := range objs {
				if u.GroupVersionKind() != snapshot.CleanupPolicyGVK {
					notes = append(notes, fmt.Sprintf("%s: %s %s ignored", path, u.GetKind(), u.GetName()))
					continue
				}
				if u.GetName() == "" {
					return fmt.Errorf("%s: a CleanupPolicy without metadata.name", path)
				}
				if first, ok := seen[u.GetName()]; ok {
					return fmt.Errorf("%s: CleanupPolicy %s is also in %s", path, u.GetName(), first)
				}
				seen[u.GetName()] = path
				policies = append(policies, u)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return policies, notes, nil
}

func manifestFile(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readFile decodes every document of a file.
func readFile(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return nil, fmt.Errorf("%s: document %d: apiVersion and kind are required", path, i)
		}
		if !u.IsList() {
			out = append(out, u)
			continue
		}
		if err := u.EachListItem(func(o runtime.Object) error {
			out = append(out, o.(*unstructured.Unstructured))
			return nil
		}); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
	}
}
