package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	// ObjectRef is zero for a request to no object (a discovery read).
	ObjectRef struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	// ResponseStatus is zero before the response.
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	// RequestObject and ResponseObject are logged at the levels Request
	// and RequestResponse.
	RequestObject  json.RawMessage `json:"requestObject"`
	ResponseObject json.RawMessage `json:"responseObject"`
	// RequestReceived is when the API server received the request. A
	// write sent after another's response came back was received after it:
	// this order follows the sender's, where the log's order (of
	// completion) may not.
	RequestReceived metav1.MicroTime `json:"requestReceivedTimestamp"`
}

// Succeeded says whether the API server answered 2xx.
func (e *AuditEvent) Succeeded() bool {
	return e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300
}

// ReadAuditLog reads an audit log that Options.AuditLog named. A last line
// the API server is still writing is left out.
func ReadAuditLog(file string) ([]AuditEvent, error) {
	events, _, err := ReadAuditFrom(file, 0)
	return events, err
}

// ReadAuditFrom reads the complete lines of an audit log from offset on,
// and returns the offset after the last of them: where to read from next
// (EachAuditEvent).
func ReadAuditFrom(file string, offset int64) ([]AuditEvent, int64, error) {
	var events []AuditEvent
	next, err := EachAuditEvent(file, offset, func(e *AuditEvent) { events = append(events, *e) })
	return events, next, err
}

// EachAuditEvent calls fn with each complete line of an audit log from
// offset on, in the log's order, and returns the offset after the last of
// them: where to read from next. An offset in the middle of a line (the
// log's size, taken while the API server wrote that line) reads from the
// next line; a last line not complete yet is left out, a blank one
// skipped. A log not written yet reads as empty.
func EachAuditEvent(file string, offset int64, fn func(*AuditEvent)) (int64, error) {
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return offset, nil
	}
	if err != nil {
		return offset, err
	}
	defer f.Close()
	from := max(offset-1, 0) // the byte before the offset says whether a line begins there
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return offset, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	if offset > 0 {
		skipped, err := r.ReadBytes('\n')
		if err != nil {
			return offset, nil // within a line not complete yet
		}
		from += int64(len(skipped))
	}
	n, err := eachLine(r, fn)
	if err != nil {
		err = fmt.Errorf("%s: %w", file, err)
	}
	return from + n, err
}

// ParseAudit decodes the complete lines of raw.
func ParseAudit(raw []byte) ([]AuditEvent, error) {
	var events []AuditEvent
	_, err := eachLine(bufio.NewReader(bytes.NewReader(raw)), func(e *AuditEvent) { events = append(events, *e) })
	return events, err
}

// eachLine decodes the complete lines r reads, and returns how many bytes
// they took.
func eachLine(r *bufio.Reader, fn func(*AuditEvent)) (int64, error) {
	var n int64
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return n, nil // a line not complete yet is left out
		}
		if err != nil {
			return n, err
		}
		n += int64(len(line))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev AuditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return n, fmt.Errorf("audit log line %q: %w", line, err)
		}
		fn(&ev)
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
