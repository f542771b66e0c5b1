package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateFromFile creates every object of a multi-document YAML file, in order.
func CreateFromFile(ctx context.Context, c client.Client, file string) error {
	objs, err := ObjectsFromFile(file)
	if err != nil {
		return err
	}
	for _, u := range objs {
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("%s: creating %s %s: %w", file, u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// ObjectsFromFile reads the objects of a multi-document YAML or JSON file.
func ObjectsFromFile(file string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
