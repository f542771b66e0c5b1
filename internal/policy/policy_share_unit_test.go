package policy

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSortByNameKeepsEachObjectWithItsName(t *testing.T) {
	var items []unstructured.Unstructured
	for _, n := range []string{"c-3", "c-1", "c-20", "c-2"} {
		u := unstructured.Unstructured{}
		u.SetName(n)
		u.SetLabels(map[string]string{"name": n})
		items = append(items, u)
	}
	sortByName(items)
	want := []string{"c-1", "c-2", "c-20", "c-3"}
	for i := range items {
		if items[i].GetName() != want[i] || items[i].GetLabels()["name"] != want[i] {
			t.Errorf("item %d: name %q, label %q; want %q", i, items[i].GetName(), items[i].GetLabels()["name"], want[i])
		}
	}
}
