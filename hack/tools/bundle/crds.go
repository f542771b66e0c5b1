package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
)

// ownedCRDs completes the base CSV's owned CRDs from the CRDs: one entry per
// served version, each described in the base, whose descriptors name fields
// that the version's schema has.
func (g *generator) ownedCRDs() ([]v1alpha1.CRDDescription, error) {
	type key struct{ name, version string }
	described := map[key]v1alpha1.CRDDescription{}
	for _, d := range g.base.Spec.CustomResourceDefinitions.Owned {
		if _, dup := described[key{d.Name, d.Version}]; dup {
			return nil, fmt.Errorf("base ClusterServiceVersion describes %s %s twice", d.Name, d.Version)
		}
		described[key{d.Name, d.Version}] = d
	}
	var owned []v1alpha1.CRDDescription
	for _, crd := range g.crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			k := key{crd.Name, v.Name}
			d, ok := described[k]
			if !ok {
				return nil, fmt.Errorf("base ClusterServiceVersion: describe CRD %s version %s under spec.customresourcedefinitions.owned", crd.Name, v.Name)
			}
			delete(described, k)
			if d.Kind == "" {
				d.Kind = crd.Spec.Names.Kind
			}
			if d.Kind != crd.Spec.Names.Kind {
				return nil, fmt.Errorf("base ClusterServiceVersion: %s %s has kind %s, the CRD says %s", d.Name, d.Version, d.Kind, crd.Spec.Names.Kind)
			}
			if d.Description == "" && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				d.Description = v.Schema.OpenAPIV3Schema.Description
			}
			if err := checkDescriptors(d, v); err != nil {
				return nil, err
			}
			owned = append(owned, d)
		}
	}
	if len(described) > 0 {
		var stale []string
		for k := range described {
			stale = append(stale, k.name+" "+k.version)
		}
		sort.Strings(stale)
		return nil, fmt.Errorf("base ClusterServiceVersion describes CRDs %s builds no served version of: %s", ManifestsSource, strings.Join(stale, ", "))
	}
	return owned, nil
}

// examples renders alm-examples: every object of an owned kind, in the
// order the kustomizations list them.
func (g *generator) examples() (string, error) {
	ownedKinds := map[string]bool{}
	for _, crd := range g.crds {
		ownedKinds[crd.Spec.Group+"/"+crd.Spec.Names.Kind] = true
	}
	examples := []map[string]any{}
	for _, u := range g.objs {
		if !ownedKinds[u.GroupVersionKind().Group+"/"+u.GetKind()] {
			continue
		}
		examples = append(examples, u.Object)
		g.done[objectKey(u)] = true
		g.bundle.InCSV = append(g.bundle.InCSV, Note{objectKey(u), "alm-examples"})
	}
	if len(examples) == 0 {
		return "", fmt.Errorf("%s builds no sample of an owned CRD for alm-examples", ManifestsSource)
	}
	data, err := json.MarshalIndent(examples, "", "  ")
	if err != nil {
		return "", err
	}
	return string(data), nil
}
