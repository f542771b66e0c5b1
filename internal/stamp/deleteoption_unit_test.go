package stamp

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestDeleteOptionRefusesAnEmptyStamp: a stamp without a propagation policy
// would release the operator's deleteOption, and the work would be deleted
// with its resources; it is refused before any request (the client is nil).
func TestDeleteOptionRefusesAnEmptyStamp(t *testing.T) {
	w := &metav1.ObjectMeta{Namespace: "c1", Name: "app", UID: "u1"}
	result, _, err := DeleteOption(context.Background(), nil, nil, nil, w, decision.DeleteOption{})
	if err == nil || !strings.Contains(err.Error(), "c1/app") || result.Written() {
		t.Fatalf("an empty deleteOption was not refused: result %d, error %v", result, err)
	}
}
