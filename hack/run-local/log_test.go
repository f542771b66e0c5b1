package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestNewLogger: console lines for people by default, one JSON object a
// line with -log-format=json, and an error naming the flag otherwise.
func TestNewLogger(t *testing.T) {
	var console bytes.Buffer
	log, err := newLogger("console", &console)
	if err != nil {
		t.Fatal(err)
	}
	log.WithName("managedcluster").Info("cluster governed", "cluster", "prod-eu", "policy", "production")
	line := strings.TrimSpace(console.String())
	if json.Valid([]byte(line)) {
		t.Fatalf("console line is JSON: %s", line)
	}
	for _, want := range []string{"INFO", "managedcluster", "cluster governed", `"cluster": "prod-eu"`} {
		if !strings.Contains(line, want) {
			t.Errorf("console line %q lacks %q", line, want)
		}
	}

	var js bytes.Buffer
	log, err = newLogger("json", &js)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("cluster governed", "cluster", "prod-eu")
	var obj map[string]any
	if err := json.Unmarshal(js.Bytes(), &obj); err != nil {
		t.Fatalf("json line %q: %v", js.String(), err)
	}
	if _, isString := obj["ts"].(string); obj["msg"] != "cluster governed" || obj["cluster"] != "prod-eu" || !isString {
		t.Errorf("json line %v", obj)
	}

	if _, err := newLogger("text", &js); err == nil || !strings.Contains(err.Error(), "-log-format") {
		t.Errorf("newLogger(text) = %v, want an error naming -log-format", err)
	}
}
