package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// auditPolicy records the writes to ManifestWorks, at the Metadata level.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete]
  resources:
  - group: work.open-cluster-management.io
    resources: [manifestworks]
- level: Metadata
  verbs: [delete]
  resources:
  - group: cluster.open-cluster-management.io
    resources: [managedclusters]
- level: None
`

// AuditEvent is what a test reads of an audit log line.
type AuditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	// RequestObject and ResponseObject are logged at the levels Request
	// and RequestResponse.
	RequestObject  json.RawMessage `json:"requestObject"`
	ResponseObject json.RawMessage `json:"responseObject"`
}

// ReadAuditLog reads an audit log that Options.AuditLog named. A last line
// the API server is still writing is left out.
func ReadAuditLog(file string) ([]AuditEvent, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var events []AuditEvent
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev AuditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		events = append(events, ev)
	}
}

// writeAuditPolicy writes the policy given, or auditPolicy, next to the
// log file.
func writeAuditPolicy(logFile, given string) (string, error) {
	if given == "" {
		given = auditPolicy
	}
	policy := filepath.Join(filepath.Dir(logFile), "audit-policy.yaml")
	return policy, os.WriteFile(policy, []byte(given), 0o600)
}
