package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadAuditLog: the complete lines are read, a blank one skipped, the
// line the API server is still writing left out; a malformed complete line
// is an error.
func TestReadAuditLog(t *testing.T) {
	a := `{"stage":"ResponseComplete","verb":"delete","objectRef":{"name":"a"}}` + "\n"
	b := `{"stage":"ResponseComplete","verb":"delete","objectRef":{"name":"b"}}` + "\n"
	for _, c := range []struct {
		name, log string
		want      []string
		fails     bool
	}{
		{name: "empty"},
		{name: "complete", log: a + b, want: []string{"a", "b"}},
		{name: "a line being written", log: a + b + `{"stage":"ResponseComplete","verb":"del`, want: []string{"a", "b"}},
		{name: "a blank line", log: a + "\n" + b, want: []string{"a", "b"}},
		{name: "a malformed line", log: a + "{\n" + b, fails: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "audit.log")
			if err := os.WriteFile(file, []byte(c.log), 0o600); err != nil {
				t.Fatal(err)
			}
			events, err := ReadAuditLog(file)
			if c.fails {
				if err == nil {
					t.Fatalf("read %+v, want an error", events)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range events {
				got = append(got, e.ObjectRef.Name)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("read %v, want %v", got, c.want)
			}
		})
	}
}
