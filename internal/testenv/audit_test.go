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

// TestReadAuditFrom: a mark taken while the API server was half-way
// through a line leaves that line out, and reads every line after it; the
// offset returned reads on from the last complete line.
func TestReadAuditFrom(t *testing.T) {
	line := func(name string) string {
		return `{"stage":"ResponseComplete","verb":"delete","user":{"username":"op"},"objectRef":{"resource":"manifestworks","namespace":"c1","name":"` + name + `","apiGroup":"work.open-cluster-management.io"},"responseStatus":{"code":200}}` + "\n"
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before, during := line("before"), line("during")
	half := len(during) / 2
	if err := os.WriteFile(path, []byte(before+during[:half]), 0o600); err != nil {
		t.Fatal(err)
	}
	midLine := size()
	atLineStart := int64(len(before))
	if events, next, err := ReadAuditFrom(path, midLine); err != nil || len(events) != 0 || next != midLine {
		t.Fatalf("from a mark in a line not yet complete: %v, %d, %v; want nothing", events, next, err)
	}
	if events, next, err := ReadAuditFrom(path, 0); err != nil || len(events) != 1 || next != int64(len(before)) {
		t.Fatalf("from the start, before a line is complete: %v, %d, %v; want one event, then %d", events, next, err, len(before))
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(during[half:] + line("after")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	end := size()
	for _, c := range []struct {
		mark int64
		want []string
	}{
		{0, []string{"before", "during", "after"}},
		{atLineStart - 1, []string{"during", "after"}}, // on the newline that ends "before"
		{atLineStart, []string{"during", "after"}},
		{midLine, []string{"after"}},
		{end, nil},
	} {
		events, next, err := ReadAuditFrom(path, c.mark)
		if err != nil || next != end {
			t.Fatalf("from %d: %v, reading on from %d (the end: %d)", c.mark, err, next, end)
		}
		var got []string
		for _, e := range events {
			got = append(got, e.ObjectRef.Name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("from %d read %v, want %v", c.mark, got, c.want)
		}
	}
}
