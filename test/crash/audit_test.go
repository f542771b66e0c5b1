package crash

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// auditEvent is one line of the audit log (testenv.AuditEvent), with what
// the checks read of it.
type auditEvent struct{ testenv.AuditEvent }

func (e *auditEvent) succeeded() bool { return e.Succeeded() }

func (e *auditEvent) resource() string { return e.ObjectRef.Resource }

func (e *auditEvent) namespace() string { return e.ObjectRef.Namespace }

func (e *auditEvent) name() string { return e.ObjectRef.Name }

func (e *auditEvent) String() string {
	ref := ""
	if r := e.ObjectRef; r.Resource != "" {
		ref = r.Resource
		if r.Subresource != "" {
			ref += "/" + r.Subresource
		}
		ref += " " + r.Namespace + "/" + r.Name
	}
	return fmt.Sprintf("%s %s %s -> %d", e.User.Username, e.Verb, ref, e.ResponseStatus.Code)
}

// responseMeta is the metadata of the object a write returned.
type responseMeta struct {
	Metadata struct {
		UID               string            `json:"uid"`
		ResourceVersion   string            `json:"resourceVersion"`
		Generation        int64             `json:"generation"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
		Annotations       map[string]string `json:"annotations"`
		Finalizers        []string          `json:"finalizers"`
	} `json:"metadata"`
	Spec struct {
		DeleteOption *struct {
			PropagationPolicy string `json:"propagationPolicy"`
		} `json:"deleteOption"`
		HolderIdentity *string `json:"holderIdentity"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type               string `json:"type"`
			Status             string `json:"status"`
			ObservedGeneration int64  `json:"observedGeneration"`
		} `json:"conditions"`
	} `json:"status"`
}

func (e *auditEvent) response() (*responseMeta, error) {
	if len(e.ResponseObject) == 0 {
		return nil, fmt.Errorf("no response object logged for %s", e)
	}
	var m responseMeta
	if err := json.Unmarshal(e.ResponseObject, &m); err != nil {
		return nil, fmt.Errorf("decoding the response of %s: %w", e, err)
	}
	return &m, nil
}

// revision is the etcd revision a write's response carries. One etcd
// orders every write of the control plane, so revisions compare across
// objects (an implementation detail of etcd-backed API servers that this
// test relies on, and no client should).
func (m *responseMeta) revision() (int64, error) {
	return strconv.ParseInt(m.Metadata.ResourceVersion, 10, 64)
}

// auditLog reads the audit log as the API server appends to it.
type auditLog struct {
	path   string
	mu     sync.Mutex
	offset int64
	events []auditEvent
}

// poll reads what was appended since the last call.
func (a *auditLog) poll() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	events, next, err := testenv.ReadAuditFrom(a.path, a.offset)
	if err != nil {
		return err
	}
	a.offset = next
	for _, e := range events {
		if e.Stage == "ResponseComplete" {
			a.events = append(a.events, auditEvent{e})
		}
	}
	return nil
}

// len is how many events were read so far.
func (a *auditLog) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.events)
}

// since returns the events read after the first n.
func (a *auditLog) since(n int) []auditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n > len(a.events) {
		return nil
	}
	return append([]auditEvent(nil), a.events[n:]...)
}
