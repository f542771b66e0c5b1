package crash

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// propRecorded: the teardown's record lists exactly the objects the audit
// log shows the operator deleted (successfully) for that cluster, each
// once, done, in the order of their groups (every deletion of a group
// listed after another follows every deletion of that one), and nothing
// else; it ended with the cluster.
const propRecorded = "recorded"

// readRecords reads the real (not dry-run) records of the teardowns.
func readRecords(ctx context.Context, c client.Reader, tds []*teardown) (map[string][]record.Record, error) {
	out := map[string][]record.Record{}
	for _, td := range tds {
		rs, err := record.List(ctx, c, record.DefaultNamespace, td.cluster)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if !r.DryRun {
				out[td.cluster] = append(out[td.cluster], r)
			}
		}
	}
	return out, nil
}

// readOutcomes sets each teardown's outcome from its one record; a
// teardown with no record, or more than one, keeps none.
func readOutcomes(ctx context.Context, c client.Reader, tds []*teardown) (map[string][]record.Record, error) {
	records, err := readRecords(ctx, c, tds)
	if err != nil {
		return nil, err
	}
	for _, td := range tds {
		if rs := records[td.cluster]; len(rs) == 1 {
			td.outcome = rs[0].Outcome
		}
	}
	return records, nil
}

// entryKey names a record entry's object as the audit log does.
func entryKey(e record.Entry) objectKey {
	resource, _, _ := strings.Cut(e.Resource, ".")
	if resource == "namespaces" {
		return objectKey{"namespaces", "", e.Name}
	}
	return objectKey{resource, e.Namespace, e.Name}
}

// checkRecords checks each teardown's record against the operator's
// deletions in the audit log. A DELETE whose answer the operator never saw
// (killed mid-request: the log says 504) deleted the object if the witness
// saw it begin deleting; a deletecollection that failed (killed, or refused
// part way) deleted those of its resource and namespace the witness saw
// begin deleting and no other request of the operator deleted.
func checkRecords(events []auditEvent, w *witness, tds []*teardown, records map[string][]record.Record, users []string) verdict {
	v := verdict{}
	deletions := operatorDeletions(events, users, v)
	for _, td := range tds {
		rs := records[td.cluster]
		if len(rs) != 1 {
			v.add(propRecorded, "%s: %d records, want 1", td.cluster, len(rs))
			continue
		}
		r := rs[0]
		if r.End == nil {
			v.add(propRecorded, "%s: the record has not ended", td.cluster)
		}
		if r.Resumed {
			v.add(propRecorded, "%s: the record says it resumed: it lost what was done before", td.cluster)
		}
		// What the audit log shows deleted, and where (etcd revision).
		revision := map[objectKey]int64{}
		var failedCollections []deletion
		for _, d := range deletions {
			if !(d.key.namespace == td.cluster || d.key == objectKey{"namespaces", "", td.cluster}) {
				continue
			}
			rev := d.revision
			if d.event.Verb == "deletecollection" && d.event.succeeded() {
				// A deletecollection answers with the objects as it listed
				// them, each at its last write before the deletion (for
				// an add-on, often its creation): where its deletion began
				// is what the witness saw.
				started, ok := w.deleting(d.key)
				if !ok {
					v.add(propRecorded, "%s: %s was deleted by %s, but its deletion was never seen", td.cluster, d.key, &d.event)
					continue
				}
				rev = started.revision
			}
			if !d.event.succeeded() && d.event.Verb == "deletecollection" {
				// Killed mid-request, or refused part way: the objects it
				// deleted before are those of its resource and namespace
				// the witness saw begin deleting that nothing else deleted.
				failedCollections = append(failedCollections, d)
				continue
			}
			if !d.event.succeeded() {
				started, ok := w.deleting(d.key)
				if !ok || d.event.ResponseStatus.Code != 504 {
					continue
				}
				rev = started.revision
			}
			if _, twice := revision[d.key]; !twice {
				revision[d.key] = rev
			}
		}
		for _, d := range failedCollections {
			for k, started := range w.deletingIn(d.key.resource, d.key.namespace) {
				if _, known := revision[k]; !known {
					revision[k] = started.revision
				}
			}
		}
		listed := map[objectKey]bool{}
		type group struct {
			step, priority string
			lo, hi         int64 // the revisions of its deletions
			first          objectKey
		}
		var groups []*group
		for _, e := range r.Entries {
			if e.Action != record.Deleted {
				continue
			}
			k := entryKey(e)
			if listed[k] {
				v.add(propRecorded, "%s: %s is listed deleted twice", td.cluster, k)
			}
			listed[k] = true
			if e.State != record.Done {
				v.add(propRecorded, "%s: %s is listed %s, not done", td.cluster, k, e.State)
			}
			rev, ok := revision[k]
			if !ok {
				v.add(propRecorded, "%s: %s is listed deleted, but the operator did not delete it", td.cluster, k)
				continue
			}
			if n := len(groups); n == 0 || groups[n-1].step != e.Step || groups[n-1].priority != e.Priority {
				groups = append(groups, &group{step: e.Step, priority: e.Priority, lo: rev, hi: rev, first: k})
			}
			g := groups[len(groups)-1]
			g.lo, g.hi = min(g.lo, rev), max(g.hi, rev)
		}
		for k := range revision {
			if !listed[k] {
				v.add(propRecorded, "%s: the operator deleted %s, which the record does not list", td.cluster, k)
			}
		}
		for i := 1; i < len(groups); i++ {
			if a, b := groups[i-1], groups[i]; b.lo < a.hi {
				v.add(propRecorded, "%s: %s %s (priority %q) is listed after %s %s (priority %q) but deleted before it ended (revision %d < %d)",
					td.cluster, b.step, b.first, b.priority, a.step, a.first, a.priority, b.lo, a.hi)
			}
		}
	}
	return v
}

func reportRecords(t *testing.T, v verdict) {
	t.Run(propRecorded, func(t *testing.T) {
		for _, msg := range v[propRecorded] {
			t.Error(msg)
		}
	})
}

// TestRecordCheckFails proves the record check can fail: a record that
// misses a deletion, lists one the operator did not make, lists one twice,
// leaves one intended, or lists groups out of their order.
func TestRecordCheckFails(t *testing.T) {
	clean := func() (*history, map[string][]record.Record) {
		h := cleanHistory("Required")
		r := record.Record{Cluster: "c1", Entries: []record.Entry{}}
		end := r.Start
		r.End = &end
		add := func(step, priority string, k objectKey) {
			resource := k.resource
			if resource != "namespaces" {
				resource += ".example.io"
			}
			r.Entries = append(r.Entries, record.Entry{Step: step, Priority: priority, Action: record.Deleted, State: record.Done,
				Resource: resource, Namespace: k.namespace, Name: k.name})
		}
		add("signal", "", objectKey{"manifestworks", "c1", signalWork})
		add("stage/addons", "unset", objectKey{"managedclusteraddons", "c1", "addon-0"})
		add("stage/manifestworks", "unset", objectKey{"manifestworks", "c1", "work-punset-0"})
		add("stage/manifestworks", "10", objectKey{"manifestworks", "c1", "work-p10-0"})
		add("namespace", "", objectKey{"namespaces", "", "c1"})
		return h, map[string][]record.Record{"c1": {r}}
	}
	for _, tc := range []struct {
		name    string
		breakIt func(h *history, r *record.Record)
		want    string
	}{
		{"a clean record", func(*history, *record.Record) {}, ""},
		{"a deletion missing", func(_ *history, r *record.Record) { r.Entries = slices.Delete(r.Entries, 2, 3) }, "does not list"},
		{"a deletion whose answer was never seen, which took effect", func(h *history, _ *record.Record) {
			key := objectKey{"manifestworks", "c1", "work-p10-0"}
			for i, e := range h.events {
				if keyOf(&e) == key {
					h.events[i].ResponseStatus.Code = 504
				}
			}
		}, ""},
		{"a deletion whose answer was never seen, which did not take effect", func(h *history, _ *record.Record) {
			key := objectKey{"manifestworks", "c1", "work-p10-0"}
			for i, e := range h.events {
				if keyOf(&e) == key {
					h.events[i].ResponseStatus.Code = 504
				}
			}
			delete(h.w.started, key)
		}, "did not delete it"},
		{"a deletion listed that was not made", func(_ *history, r *record.Record) {
			r.Entries = append(r.Entries, record.Entry{Step: "stage/manifestworks", Action: record.Deleted, State: record.Done,
				Resource: "manifestworks.example.io", Namespace: "c1", Name: "ghost"})
		}, "did not delete it"},
		{"a deletion listed twice", func(_ *history, r *record.Record) { r.Entries = append(r.Entries, r.Entries[1]) }, "twice"},
		{"a deletion left intended", func(_ *history, r *record.Record) { r.Entries[3].State = record.Intended }, "not done"},
		{"groups out of order", func(_ *history, r *record.Record) {
			r.Entries[2], r.Entries[3] = r.Entries[3], r.Entries[2]
		}, "deleted before it ended"},
		{"the add-ons deleted by one deletecollection, which lists them at their last write", func(h *history, _ *record.Record) {
			asCollection(h, objectKey{"managedclusteraddons", "c1", "addon-0"}, 1)
		}, ""},
		{"the add-ons deleted by one deletecollection, listed before the signal", func(h *history, r *record.Record) {
			asCollection(h, objectKey{"managedclusteraddons", "c1", "addon-0"}, 1)
			r.Entries[0], r.Entries[1] = r.Entries[1], r.Entries[0]
		}, "deleted before it ended"},
		{"an object of a deletecollection whose deletion was never seen", func(h *history, _ *record.Record) {
			key := objectKey{"managedclusteraddons", "c1", "addon-0"}
			asCollection(h, key, 1)
			delete(h.w.started, key)
		}, "never seen"},
		{"the add-ons of a deletecollection whose answer was never seen, which took effect", func(h *history, _ *record.Record) {
			asFailedCollection(h, objectKey{"managedclusteraddons", "c1", "addon-0"})
		}, ""},
		{"the add-ons of a deletecollection whose answer was never seen, which did not take effect", func(h *history, _ *record.Record) {
			key := objectKey{"managedclusteraddons", "c1", "addon-0"}
			asFailedCollection(h, key)
			delete(h.w.started, key)
		}, "did not delete it"},
		{"no end", func(_ *history, r *record.Record) { r.End = nil }, "has not ended"},
		{"resumed", func(_ *history, r *record.Record) { r.Resumed = true }, "resumed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, rs := clean()
			r := rs["c1"][0]
			tc.breakIt(h, &r)
			rs["c1"][0] = r
			v := checkRecords(h.events, h.w, []*teardown{h.td}, rs, []string{operatorUser})
			got := strings.Join(v[propRecorded], "\n")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("want a violation saying %q, got %q", tc.want, got)
			}
			t.Log(fmt.Sprint(v[propRecorded]))
		})
	}
}

// asCollection makes the operator's DELETE of key a deletecollection of its
// resource in its namespace, whose answer lists the object as the API server
// does: as listed, at its last write before the deletion (lastWrite).
func asCollection(h *history, key objectKey, lastWrite int64) {
	for i, e := range h.events {
		if e.Verb == "delete" && keyOf(&e) == key {
			e.Verb = "deletecollection"
			e.ObjectRef.Name = ""
			e.ResponseObject = fmt.Appendf(nil, `{"items":[{"metadata":{"name":%q,"resourceVersion":"%d"}}]}`, key.name, lastWrite)
			h.events[i] = e
		}
	}
}

// asFailedCollection makes the operator's DELETE of key a deletecollection
// of its resource in its namespace that the operator never saw answered
// (killed mid-request): the log says 504 and lists nothing.
func asFailedCollection(h *history, key objectKey) {
	for i, e := range h.events {
		if e.Verb == "delete" && keyOf(&e) == key {
			e.Verb = "deletecollection"
			e.ObjectRef.Name = ""
			e.ResponseStatus.Code = 504
			e.ResponseObject = nil
			h.events[i] = e
		}
	}
}
