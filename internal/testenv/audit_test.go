package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadAuditLogPartialLine: the line the API server is still writing is
// left out, the complete ones before it are read.
func TestReadAuditLogPartialLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.log")
	log := `{"stage":"ResponseComplete","verb":"delete","objectRef":{"name":"a"}}` + "\n" +
		`{"stage":"ResponseComplete","verb":"delete","objectRef":{"name":"b"}}` + "\n" +
		`{"stage":"ResponseComplete","verb":"del`
	if err := os.WriteFile(file, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	events, err := ReadAuditLog(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].ObjectRef.Name != "a" || events[1].ObjectRef.Name != "b" {
		t.Fatalf("read %+v, want the events of a and b", events)
	}
}
