package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The API server's audit log records who deleted the add-ons, works and
// namespaces of a cluster namespace and who wrote the ManagedClusters (their
// finalizers), at the Metadata level: the scenarios read from it who did
// what, and in which order, which no watch can tell.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [delete, deletecollection]
  resources:
  - group: addon.open-cluster-management.io
    resources: [managedclusteraddons]
  - group: work.open-cluster-management.io
    resources: [manifestworks]
  - group: ""
    resources: [namespaces]
  - group: cluster.open-cluster-management.io
    resources: [managedclusters]
- level: Metadata
  verbs: [update, patch]
  resources:
  - group: cluster.open-cluster-management.io
    resources: [managedclusters]
- level: None
`

// auditLog is the API server's audit log, in the log folder.
var auditLog string

// configureAudit has the API server write its audit log, every request
// logged before its response is sent.
func configureAudit() {
	GinkgoHelper()
	auditLog = filepath.Join(logDir, "audit.log")
	policy := filepath.Join(logDir, "audit-policy.yaml")
	Expect(os.WriteFile(policy, []byte(auditPolicy), 0o600)).To(Succeed())
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", auditLog).
		Set("audit-log-mode", "blocking")
}

// auditEvent is what the scenarios read of an audit log line.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
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
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

func (e auditEvent) String() string {
	return fmt.Sprintf("%s %s %s %d by %s", e.RequestReceived.Format("15:04:05.000"), e.Verb, e.object(), e.ResponseStatus.Code, e.User.Username)
}

// object is resource/name, or resource(collection) for a deletecollection.
func (e auditEvent) object() string {
	if e.ObjectRef.Name == "" {
		return e.ObjectRef.Resource + "(collection)"
	}
	return e.ObjectRef.Resource + "/" + e.ObjectRef.Name
}

func (e auditEvent) succeeded() bool {
	return e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300
}

// auditSince reads the audit log's events received at or after from, in the
// order the API server logged them. A last line still being written is
// left out.
func auditSince(from time.Time) []auditEvent {
	GinkgoHelper()
	f, err := os.Open(auditLog)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var events []auditEvent
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return events
		}
		Expect(err).NotTo(HaveOccurred())
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e auditEvent
		Expect(json.Unmarshal(line, &e)).To(Succeed(), "audit line %s", line)
		if !e.RequestReceived.Before(from) {
			events = append(events, e)
		}
	}
}

// deletesIn are the audited deletes of add-ons and works in a namespace,
// but the namespace controller's: once a namespace is deleted it sweeps
// every resource of it with a deletecollection, whether any is left or not.
func deletesIn(events []auditEvent, namespace string) []auditEvent {
	var out []auditEvent
	for _, e := range events {
		if (e.Verb == "delete" || e.Verb == "deletecollection") && e.ObjectRef.Namespace == namespace &&
			(e.ObjectRef.Resource == "managedclusteraddons" || e.ObjectRef.Resource == "manifestworks") &&
			!(e.Verb == "deletecollection" && e.User.Username == adminUser) {
			out = append(out, e)
		}
	}
	return out
}

// clusterWrites are the audited updates and patches of a ManagedCluster's
// object (not its status), which is where finalizers are removed.
func clusterWrites(events []auditEvent, cluster string) []auditEvent {
	var out []auditEvent
	for _, e := range events {
		if (e.Verb == "update" || e.Verb == "patch") && e.ObjectRef.Resource == "managedclusters" &&
			e.ObjectRef.Name == cluster && e.ObjectRef.Subresource == "" && e.succeeded() {
			out = append(out, e)
		}
	}
	return out
}

// by keeps the events of one user; ok keeps the succeeded ones only when
// true, the refused ones only when false.
func by(events []auditEvent, user string, ok bool) []auditEvent {
	var out []auditEvent
	for _, e := range events {
		if e.User.Username == user && e.succeeded() == ok {
			out = append(out, e)
		}
	}
	return out
}

// objects lists the events' objects, in order.
func objects(events []auditEvent) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, e.object())
	}
	return out
}

// auditTrail prints events, one a line, for failure messages and reports.
func auditTrail(events []auditEvent) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}
