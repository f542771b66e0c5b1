package argocd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/argoproj/gitops-engine/pkg/health"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// statesDirEnv names the directory where the suite of test/gitops keeps
// every policy it assessed as the real operator wrote it on a real API
// server, with the health it computed (make test sets it for both).
const statesDirEnv = "GITOPS_STATES_DIR"

// TestOperatorWrittenStates evaluates each of those policies with the
// shipped argocd-cm.yaml through Argo CD's own code, and compares status
// and message with what the suite asserted on.
func TestOperatorWrittenStates(t *testing.T) {
	dir := os.Getenv(statesDirEnv)
	if dir == "" {
		t.Skipf("%s is not set: make test runs the suite of test/gitops, which writes the states, and then this test", statesDirEnv)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	overrides := healthOverrides(t, shippedConfigMap(t))
	seen := map[health.HealthStatusCode]bool{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var kept struct {
			Object map[string]any `json:"object"`
			Argo   struct {
				Status  health.HealthStatusCode `json:"status"`
				Message string                  `json:"message"`
			} `json:"argo"`
		}
		if err := json.Unmarshal(raw, &kept); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		// Read as the controller reads objects: integers as int64.
		obj := &unstructured.Unstructured{}
		js, _ := json.Marshal(kept.Object)
		if err := obj.UnmarshalJSON(js); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		got, err := health.GetResourceHealth(obj, overrides)
		if err != nil || got == nil {
			t.Errorf("%s: Argo CD shows %v: %v", filepath.Base(file), got, err)
			continue
		}
		if got.Status != kept.Argo.Status || got.Message != kept.Argo.Message {
			t.Errorf("%s: Argo CD shows %s: %q; the suite asserted on %s: %q",
				filepath.Base(file), got.Status, got.Message, kept.Argo.Status, kept.Argo.Message)
		}
		seen[got.Status] = true
	}
	t.Logf("%d states the operator wrote evaluated through Argo CD", len(files))
	for _, want := range []health.HealthStatusCode{health.HealthStatusHealthy, health.HealthStatusProgressing, health.HealthStatusDegraded, health.HealthStatusSuspended} {
		if !seen[want] {
			t.Errorf("no state the operator wrote reads %s: the suite of test/gitops did not run with %s=%s, or lost its cases", want, statesDirEnv, dir)
		}
	}
}
