package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// auditPolicy records every write of the operator's identity with its
// request, and nothing else. Events are not actions.
func auditPolicy(user string) string {
	return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: None
  resources:
  - group: ""
    resources: ["events"]
  - group: "events.k8s.io"
    resources: ["events"]
- level: RequestResponse
  users: ["` + user + `"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`
}

// auditEvent is one line of the audit log (testenv.AuditEvent), with what
// the comparison reads of it.
type auditEvent struct{ testenv.AuditEvent }

// Write is one write of the operator to one object, as the comparison
// sees it.
type Write struct {
	// Verb is the plan's verb for the write (stamp, label, unlabel, delete,
	// force, recordUnconfirmed, removeFinalizer), recordForcing for the
	// record that precedes a force, deleteCollection for each object a
	// deletecollection deleted, or the request's verb (create, update,
	// patch) for a write no plan verb describes.
	Verb   string
	Object object
	// DeleteOption is the propagationPolicy a stamp writes.
	DeleteOption string
	// Finalizer is the finalizer a force or removeFinalizer removes.
	Finalizer string
	// Request is the request body, for a write no plan verb describes.
	Request string
	// Unchanged, for a patch other than a finalizer's removal or a delete,
	// is the number (from 1) of the operator's earlier write to the object
	// whose response had the same resourceVersion: the write changed
	// nothing (a delete of an object already being deleted). It is
	// reported, not forgiven.
	Unchanged int
}

func (w Write) String() string {
	s := w.Verb + " " + w.Object.String()
	if w.DeleteOption != "" {
		s += " deleteOption=" + w.DeleteOption
	}
	if w.Finalizer != "" {
		s += " finalizer=" + w.Finalizer
	}
	if w.Request != "" {
		s += " " + w.Request
	}
	if w.Unchanged > 0 {
		s += fmt.Sprintf(" (changed nothing: the resourceVersion its write #%d left)", w.Unchanged)
	}
	return s
}

// resourceVersion is the resourceVersion of the object a write returned.
func (e *auditEvent) resourceVersion() string {
	var m struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if json.Unmarshal(e.ResponseObject, &m) != nil {
		return ""
	}
	return m.Metadata.ResourceVersion
}

// resourceName names the event's resource as kubectl does: resource.group.
func (e *auditEvent) resourceName() string {
	if e.ObjectRef.APIGroup == "" {
		return e.ObjectRef.Resource
	}
	return e.ObjectRef.Resource + "." + e.ObjectRef.APIGroup
}

// touches says whether the event writes the cluster, its namespace or an
// object in it.
func (e *auditEvent) touches(cluster string) bool {
	r := e.ObjectRef
	switch {
	case r.Resource == "":
		return false
	case r.Namespace == cluster:
		return true
	case r.Namespace == "" && r.Name == cluster:
		return e.resourceName() == "namespaces" || e.resourceName() == "managedclusters.cluster.open-cluster-management.io"
	}
	return false
}

// isObjectWrite says whether the event is a write of user that changed an
// object: a successful create, update, patch or delete, not of a
// subresource (status).
func (e *auditEvent) isObjectWrite(user string) bool {
	return e.Stage == "ResponseComplete" && e.User.Username == user && e.ObjectRef.Resource != "" &&
		e.ObjectRef.Subresource == "" && e.Succeeded() &&
		slices.Contains([]string{"create", "update", "patch", "delete", "deletecollection"}, e.Verb)
}

// classify names the write an event made.
func classify(e *auditEvent) Write {
	w := Write{Verb: e.Verb, Object: objectOf(e.resourceName(), e.ObjectRef.Namespace, e.ObjectRef.Name)}
	switch e.Verb {
	case "delete":
		return w
	case "patch":
	default:
		w.Request = excerpt(e.RequestObject)
		return w
	}
	body := bytes.TrimSpace(e.RequestObject)
	if len(body) > 0 && body[0] == '[' {
		return classifyJSONPatch(w, body)
	}
	var patch struct {
		Metadata struct {
			Labels      map[string]*string `json:"labels"`
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			DeleteOption *struct {
				PropagationPolicy string `json:"propagationPolicy"`
			} `json:"deleteOption"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(body, &patch); err != nil {
		w.Request = excerpt(body)
		return w
	}
	label, labelled := patch.Metadata.Labels[v1alpha1.ClusterDeletingLabel]
	_, forcing := patch.Metadata.Annotations[v1alpha1.ForcingAnnotation]
	_, forced := patch.Metadata.Annotations[v1alpha1.ForcedObjectsAnnotation]
	_, unconfirmed := patch.Metadata.Annotations[v1alpha1.UnconfirmedOrphansAnnotation]
	switch {
	case patch.Spec.DeleteOption != nil:
		w.Verb, w.DeleteOption = "stamp", patch.Spec.DeleteOption.PropagationPolicy
	case labelled && label != nil && *label == "true":
		w.Verb = "label"
	case labelled && label == nil:
		w.Verb = "unlabel"
	case forcing || forced:
		w.Verb = "recordForcing"
	case unconfirmed:
		w.Verb = "recordUnconfirmed"
	default:
		w.Request = excerpt(body)
	}
	return w
}

// classifyJSONPatch names a JSON patch: the removal of the operator's
// finalizer from the cluster, or of the work agent's from an object.
func classifyJSONPatch(w Write, body []byte) Write {
	if f, ok := removedFinalizer(body); ok {
		w.Finalizer = f
		switch f {
		case v1alpha1.ClusterCleanupFinalizer:
			w.Verb = "removeFinalizer"
			return w
		case v1alpha1.WorkAgentFinalizer:
			w.Verb = "force"
			return w
		}
	}
	w.Request = excerpt(body)
	return w
}

// removedFinalizer reads a JSON patch that tests the object's UID and a
// finalizer's position (or the whole list, the finalizer the only one) and
// removes it, and may remove annotations too (a released cluster's): the
// finalizer it removes.
func removedFinalizer(body []byte) (string, bool) {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(body, &ops) != nil {
		return "", false
	}
	tested := map[string]string{}
	removed := ""
	for _, op := range ops {
		switch {
		case op.Op == "test" && op.Path == "/metadata/uid":
			// On exactly the object the plan read.
		case op.Op == "test" && strings.HasPrefix(op.Path, "/metadata/finalizers/"):
			var f string
			if json.Unmarshal(op.Value, &f) != nil {
				return "", false
			}
			tested[op.Path] = f
		case op.Op == "test" && op.Path == "/metadata/finalizers":
			// The whole list: the operator's finalizer as the only one.
			var fs []string
			if json.Unmarshal(op.Value, &fs) != nil {
				return "", false
			}
			for i, f := range fs {
				tested[fmt.Sprintf("/metadata/finalizers/%d", i)] = f
			}
		case op.Op == "remove" && strings.HasPrefix(op.Path, "/metadata/finalizers/"):
			f, ok := tested[op.Path]
			if !ok || removed != "" {
				return "", false
			}
			removed = f
		case op.Op == "remove" && strings.HasPrefix(op.Path, "/metadata/annotations/"):
		default:
			return "", false
		}
	}
	return removed, removed != ""
}

func excerpt(raw []byte) string {
	const max = 200
	s := string(bytes.TrimSpace(raw))
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

// auditLog is the API server's audit log, read from an offset.
type auditLog struct{ path string }

// size is where the log ends now: a mark to read from later.
func (a auditLog) size() (int64, error) {
	fi, err := os.Stat(a.path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// since reads the complete events written after the mark. The API server
// may be half-way through a line when the mark is taken; that line was
// begun before the mark and is left out with it.
func (a auditLog) since(mark int64) ([]auditEvent, error) {
	events, _, err := testenv.ReadAuditFrom(a.path, mark)
	return wrap(events), err
}

// parseAudit decodes the complete lines of an audit log.
func parseAudit(raw []byte) ([]auditEvent, error) {
	events, err := testenv.ParseAudit(raw)
	return wrap(events), err
}

func wrap(events []testenv.AuditEvent) []auditEvent {
	out := make([]auditEvent, len(events))
	for i := range events {
		out[i] = auditEvent{events[i]}
	}
	return out
}

// writesTo are the writes user made to the cluster, its namespace and the
// objects in it, in the order the API server received them.
func writesTo(events []auditEvent, user, cluster string) []Write {
	var mine []*auditEvent
	for i := range events {
		if e := &events[i]; e.isObjectWrite(user) && e.touches(cluster) {
			mine = append(mine, e)
		}
	}
	slices.SortStableFunc(mine, func(a, b *auditEvent) int { return a.RequestReceived.Time.Compare(b.RequestReceived.Time) })
	var out []Write
	rvs := map[int]string{}  // the resourceVersion a write's response had, by index
	last := map[object]int{} // the index of the object's last write
	for _, e := range mine {
		if e.Verb == "deletecollection" {
			// One write per object deleted, as the response lists them.
			names := e.collectionNames()
			if len(names) == 0 {
				out = append(out, Write{Verb: "deletecollection", Object: objectOf(e.resourceName(), e.ObjectRef.Namespace, ""), Request: "deleted nothing"})
			}
			for _, name := range names {
				out = append(out, Write{Verb: "deleteCollection", Object: objectOf(e.resourceName(), e.ObjectRef.Namespace, name)})
			}
			continue
		}
		i := len(out)
		out = append(out, classify(e))
		obj := out[i].Object
		// A patch that removes the last finalizer of an object being
		// deleted returns it at the resourceVersion it had: only other
		// patches tell a change by it.
		removes := out[i].Verb == "force" || out[i].Verb == "removeFinalizer"
		if j, ok := last[obj]; ok && (e.Verb == "patch" || e.Verb == "delete") && !removes && e.resourceVersion() != "" && e.resourceVersion() == rvs[j] {
			out[i].Unchanged = j + 1
		}
		last[obj] = i
		rvs[i] = e.resourceVersion()
	}
	return out
}

// collectionNames are the names of the objects a deletecollection's
// response lists.
func (e *auditEvent) collectionNames() []string {
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if json.Unmarshal(e.ResponseObject, &list) != nil {
		return nil
	}
	var out []string
	for _, it := range list.Items {
		out = append(out, it.Metadata.Name)
	}
	return out
}

func TestRemovedFinalizer(t *testing.T) {
	const uid = `{"op":"test","path":"/metadata/uid","value":"u"}`
	for body, want := range map[string]string{
		`[` + uid + `,{"op":"test","path":"/metadata/finalizers/1","value":"a"},{"op":"remove","path":"/metadata/finalizers/1"}]`: "a",
		`[` + uid + `,{"op":"test","path":"/metadata/finalizers","value":["a"]},{"op":"remove","path":"/metadata/finalizers/0"}]`: "a",
		// Not what was tested: not a removal the plan can match.
		`[` + uid + `,{"op":"test","path":"/metadata/finalizers","value":["a"]},{"op":"remove","path":"/metadata/finalizers/1"}]`: "",
		`[` + uid + `,{"op":"remove","path":"/metadata/finalizers/0"}]`:                                                           "",
	} {
		if got, _ := removedFinalizer([]byte(body)); got != want {
			t.Errorf("%s: removed %q, want %q", body, got, want)
		}
	}
}
