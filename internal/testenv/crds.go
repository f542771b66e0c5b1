// Package testenv locates the test binaries and CRDs that `make test` builds
// into bin/, and starts a real API server with them for the test suites.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// RepoRoot is the repository's top folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ErrNoCRDs says that the OCM and policy CRDs have not been built.
var ErrNoCRDs = errors.New("the OCM and policy CRDs are not built")

// CRDsDir is where `make crds` put the OCM and policy CRDs: $CLEANUP_CRDS_DIR,
// else bin/crds.
func CRDsDir() (string, error) {
	dir := os.Getenv("CLEANUP_CRDS_DIR")
	if dir == "" {
		dir = filepath.Join(RepoRoot(), "bin", "crds")
	}
	if _, err := os.Stat(filepath.Join(dir, "ocm")); err != nil {
		return "", fmt.Errorf("%w in %s: run 'make crds' (or 'make test')", ErrNoCRDs, dir)
	}
	return dir, nil
}

// CRDPaths are the folders and files envtest installs: ours, OCM's and the policy framework's.
func CRDPaths() ([]string, error) {
	dir, err := CRDsDir()
	if err != nil {
		return nil, err
	}
	return []string{
		filepath.Join(RepoRoot(), "config", "crd", "bases"),
		filepath.Join(dir, "ocm"),
		filepath.Join(dir, "policy"),
	}, nil
}

// LoadCRDs reads every CRD in the OCM and policy folders.
func LoadCRDs() ([]apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := CRDsDir()
	if err != nil {
		return nil, err
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, sub := range []string{"ocm", "policy"} {
		files, err := filepath.Glob(filepath.Join(dir, sub, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.Unmarshal(raw, &crd); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			crds = append(crds, crd)
		}
	}
	return crds, nil
}

// CRDsNamed returns the OCM and policy CRDs of the given names.
func CRDsNamed(names ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := LoadCRDs()
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for i := range all {
		if slices.Contains(names, all[i].Name) {
			out = append(out, &all[i])
		}
	}
	if len(out) != len(names) {
		return nil, fmt.Errorf("found %d of the CRDs %v", len(out), names)
	}
	return out, nil
}
