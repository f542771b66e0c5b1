package decision

import "encoding/json"

// OwnsField says whether a managedFields entry's fieldsV1 holds path: the
// field itself, or fields under it.
func OwnsField(raw []byte, path ...string) bool {
	var node map[string]any
	if err := json.Unmarshal(raw, &node); err != nil {
		return false
	}
	for _, name := range path {
		next, ok := node["f:"+name].(map[string]any)
		if !ok {
			return false
		}
		node = next
	}
	return true
}
