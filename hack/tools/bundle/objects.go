package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// manifestFileName is <name>_<group>_<version>_<kind>.yaml, the core group
// written as nothing: <name>_v1_service.yaml.
func manifestFileName(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	parts := []string{u.GetName()}
	if gvk.Group != "" {
		parts = append(parts, gvk.Group)
	}
	parts = append(parts, gvk.Version, strings.ToLower(gvk.Kind))
	return strings.Join(parts, "_") + ".yaml"
}

// withoutNamespace drops the namespace of a namespaced object: OLM creates
// it in the install namespace.
func withoutNamespace(u *unstructured.Unstructured, namespaced bool) *unstructured.Unstructured {
	if !namespaced || u.GetNamespace() == "" {
		return u
	}
	c := u.DeepCopy()
	c.SetNamespace("")
	return c
}

func objectKey(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

func sortNotes(n []Note) {
	sort.Slice(n, func(i, j int) bool { return n[i].Object < n[j].Object })
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("%s: %w", objectKey(u), err)
	}
	return nil
}

// strictConvert decodes obj into into and refuses unknown fields, so that
// a misspelt field of the base CSV is an error rather than lost.
func strictConvert(obj map[string]any, into any) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}
