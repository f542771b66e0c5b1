package crash

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// auditEvent is what the checks read of one line of the audit log.
type auditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject  json.RawMessage `json:"requestObject"`
	ResponseObject json.RawMessage `json:"responseObject"`
	// RequestReceived is when the API server received the request.
	RequestReceived metav1.MicroTime `json:"requestReceivedTimestamp"`
}

func (e *auditEvent) succeeded() bool {
	return e.ResponseStatus != nil && e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300
}

func (e *auditEvent) resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Resource
}

func (e *auditEvent) namespace() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Namespace
}

func (e *auditEvent) name() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Name
}

func (e *auditEvent) String() string {
	code := 0
	if e.ResponseStatus != nil {
		code = e.ResponseStatus.Code
	}
	ref := ""
	if e.ObjectRef != nil {
		ref = e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			ref += "/" + e.ObjectRef.Subresource
		}
		ref += " " + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
	}
	return fmt.Sprintf("%s %s %s -> %d", e.User.Username, e.Verb, ref, code)
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
	path    string
	mu      sync.Mutex
	offset  int64
	partial []byte
	events  []auditEvent
}

// poll reads what was appended since the last call.
func (a *auditLog) poll() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.Open(a.path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return err
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	a.offset += int64(len(raw))
	raw = append(a.partial, raw...)
	end := bytes.LastIndexByte(raw, '\n')
	if end < 0 {
		a.partial = raw
		return nil
	}
	a.partial = append([]byte(nil), raw[end+1:]...)
	for _, line := range bytes.Split(raw[:end], []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		var e auditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("audit log line %q: %w", line, err)
		}
		if e.Stage == "ResponseComplete" {
			a.events = append(a.events, e)
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
