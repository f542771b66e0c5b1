package decision

import "testing"

func TestOwnsField(t *testing.T) {
	raw := []byte(`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},` +
		`"f:spec":{".":{},"f:pruneObjectBehavior":{},"f:deleteOption":{".":{}}}}`)
	cases := []struct {
		path []string
		want bool
	}{
		{[]string{"spec", "pruneObjectBehavior"}, true},
		{[]string{"metadata", "annotations", "kubectl.kubernetes.io/last-applied-configuration"}, true},
		{[]string{"spec", "deleteOption"}, true},
		{[]string{"spec", "deleteOption", "propagationPolicy"}, false},
		{[]string{"spec", "remediationAction"}, false},
	}
	for _, c := range cases {
		if got := OwnsField(raw, c.path...); got != c.want {
			t.Errorf("OwnsField(%v) = %v, want %v", c.path, got, c.want)
		}
	}
	if OwnsField([]byte("not json"), "spec") {
		t.Errorf("an unreadable fieldsV1 owns nothing")
	}
}
