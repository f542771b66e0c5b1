package review

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRecordsOnlyInTheirNamespace: a snapshot holding the teardown records
// answers a list of ConfigMaps in their namespace, and refuses one
// elsewhere rather than answer it empty.
func TestRecordsOnlyInTheirNamespace(t *testing.T) {
	h := &Hub{Resources: []Resource{{Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespaced: true}},
		Records: "ops", Objects: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"namespace": "ops", "name": "teardown-c1-0", "labels": map[string]any{"r": "true"}}}}}
	s, err := newStore(h)
	if err != nil {
		t.Fatal(err)
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := s.List(context.Background(), list, client.InNamespace("ops"), client.MatchingLabels{"r": "true"}); err != nil || len(list.Items) != 1 {
		t.Errorf("records in ops: %d, %v; want the one", len(list.Items), err)
	}
	if err := s.List(context.Background(), list, client.InNamespace("c1")); !errors.Is(err, errNotHeld) {
		t.Errorf("ConfigMaps of c1: %v, want errNotHeld", err)
	}
	if err := s.List(context.Background(), list); !errors.Is(err, errNotHeld) {
		t.Errorf("ConfigMaps of every namespace: %v, want errNotHeld", err)
	}
}
