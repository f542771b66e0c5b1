package decision

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// Annotation is one annotation of o, as o.GetAnnotations()[key] gives it,
// without the copy of every annotation an unstructured object's
// GetAnnotations makes: the fleet pass reads two of each cluster's at
// every pass.
func Annotation(o interface{ GetAnnotations() map[string]string }, key string) (string, bool) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		v, ok := o.GetAnnotations()[key]
		return v, ok
	}
	raw, _, err := unstructured.NestedFieldNoCopy(u.Object, "metadata", "annotations")
	annotations, isMap := raw.(map[string]any)
	if err != nil || !isMap {
		return "", false
	}
	// As GetAnnotations: a null value reads as "", and a value that is not
	// a string leaves the object without annotations.
	for _, v := range annotations {
		if _, isString := v.(string); !isString && v != nil {
			return "", false
		}
	}
	v, ok := annotations[key]
	s, _ := v.(string)
	return s, ok
}
