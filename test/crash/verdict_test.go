package crash

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator/heartbeat"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// deletion is one DELETE by the operator, of any outcome.
type deletion struct {
	key   objectKey
	event auditEvent
	// revision is where the API server recorded a successful DELETE (the
	// deletionTimestamp it set); 0 for a failed one.
	revision int64
}

// The properties a teardown is checked for, each reported as a subtest.
const (
	// Every teardown ends: the operator deleted everything the stages
	// name and the namespace, and reported the outcome its strategy
	// declares.
	propComplete = "complete"
	// Each deletion starts once what precedes it is gone: the signal
	// work, the gate, the add-ons, the works by cleanup-priority, the
	// namespace.
	propOrder = "in-order"
	// No object is deleted twice.
	propOnce = "once"
	// Nothing but a deleted cluster's namespace and its stage objects
	// is deleted.
	propInside = "inside"
	// Every work is deleted with the deleteOption the teardown requires
	// (Orphan under Needless, the rule's SelectivelyOrphan otherwise),
	// once the agent applied it.
	propOrphan = "orphan-first"
	// Only BestEffort forces, and every forced object is recorded on the
	// cluster (its forced-objects count is not below the objects forced).
	propForcing = "forcing-recorded"
	// The forced-objects count on the cluster, which the final condition
	// reports, is the number of objects forced.
	propForcedCount = "forced-count"
)

var properties = []string{propComplete, propOrder, propOnce, propInside, propOrphan, propForcing, propForcedCount}

// verdict collects, by property, what the audit log and the witness show
// against the contract.
type verdict map[string][]string

func (v verdict) add(prop, format string, args ...any) {
	v[prop] = append(v[prop], fmt.Sprintf(format, args...))
}

// keyOf names the object of an audit event; a namespace is named by its
// name alone (the audit log also gives it as its own namespace).
func keyOf(e *auditEvent) objectKey {
	if e.resource() == "namespaces" {
		return objectKey{"namespaces", "", e.name()}
	}
	return objectKey{e.resource(), e.namespace(), e.name()}
}

// operatorDeletions are the operator's DELETEs, in the order they were
// logged, but for each process's own heartbeat, which it deletes as it
// stops: the operator's object, of no cluster.
func operatorDeletions(events []auditEvent, users []string, v verdict) []deletion {
	var out []deletion
	for _, e := range events {
		if e.resource() == "configmaps" && e.namespace() == record.DefaultNamespace && strings.HasPrefix(e.name(), heartbeat.NamePrefix) {
			continue
		}
		if e.Verb == "deletecollection" && slices.Contains(users, e.User.Username) {
			out = append(out, collectionDeletions(e, v)...)
			continue
		}
		if e.Verb != "delete" || !slices.Contains(users, e.User.Username) {
			continue
		}
		d := deletion{key: keyOf(&e), event: e}
		if e.succeeded() {
			m, err := e.response()
			if err == nil {
				d.revision, err = m.revision()
			}
			if err != nil {
				v.add(propComplete, "cannot place %s: %v", &e, err)
			}
		}
		out = append(out, d)
	}
	return out
}

// collectionDeletions are the deletions of a deletecollection: one per
// object its response lists, at the revision the list was read (which the
// deletion of each follows). One that did not succeed lists nothing, yet
// may have deleted some objects before it failed: it is an attempt on every
// object of its resource in its namespace (key with no name).
func collectionDeletions(e auditEvent, v verdict) []deletion {
	if !e.succeeded() {
		return []deletion{{key: objectKey{e.resource(), e.namespace(), ""}, event: e}}
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name            string `json:"name"`
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(e.ResponseObject, &list); err != nil {
		v.add(propComplete, "cannot read the objects of %s: %v", &e, err)
		return nil
	}
	var out []deletion
	for _, it := range list.Items {
		rev, err := strconv.ParseInt(it.Metadata.ResourceVersion, 10, 64)
		if err != nil {
			v.add(propComplete, "cannot place %s of %s: %v", it.Metadata.Name, &e, err)
		}
		out = append(out, deletion{key: objectKey{e.resource(), e.namespace(), it.Metadata.Name}, event: e, revision: rev})
	}
	return out
}

// forcedPatch says whether an audit event is a removal of the work agent's
// finalizer by the operator (what BestEffort calls forcing), whatever its
// answer: one the operator was killed before it saw may have succeeded.
func forcedPatch(e *auditEvent, users []string) bool {
	if e.Verb != "patch" || !slices.Contains(users, e.User.Username) {
		return false
	}
	if r := e.resource(); r != "manifestworks" && r != "managedclusteraddons" {
		return false
	}
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	if err := json.Unmarshal(e.RequestObject, &ops); err != nil {
		return false // not a JSON patch
	}
	for _, op := range ops {
		if op.Op == "test" && strings.HasPrefix(op.Path, "/metadata/finalizers/") && op.Value == v1alpha1.WorkAgentFinalizer {
			return true
		}
	}
	return false
}

// checkTeardowns verifies every teardown against the audit log and the
// witness, and that the operator deleted nothing else.
func checkTeardowns(events []auditEvent, w *witness, tds []*teardown, bystanders []string, users []string) verdict {
	v := verdict{}
	if err := w.failed(); err != nil {
		v.add(propComplete, "the witness failed: %v", err)
	}
	deletions := operatorDeletions(events, users, v)
	byCluster := map[string]*teardown{}
	for _, td := range tds {
		byCluster[td.cluster] = td
	}

	// Outside: only the content of a deleted cluster's namespace, and the
	// namespace, are ever deleted; twice: no object is deleted twice.
	attempts := map[objectKey][]deletion{}
	for _, d := range deletions {
		switch {
		case d.key.resource == "namespaces":
			if byCluster[d.key.name] == nil {
				v.add(propInside, "outside: %s, not the namespace of a deleted cluster, was deleted: %s", d.key, &d.event)
			}
		case byCluster[d.key.namespace] == nil:
			v.add(propInside, "outside: %s, not in the namespace of a deleted cluster, was deleted: %s", d.key, &d.event)
		case d.key.resource != "manifestworks" && d.key.resource != "managedclusteraddons":
			v.add(propInside, "outside: %s, of no deletion stage (a monitored or unrelated object), was deleted: %s", d.key, &d.event)
		}
		var before []deletion
		for _, p := range attempts[d.key] {
			if p.event.succeeded() {
				before = append(before, p)
			}
		}
		if d.event.succeeded() && len(before) > 0 {
			v.add(propOnce, "twice: %s was deleted again by %s (revision %d), after %s (revision %d)",
				d.key, d.event.User.Username, d.revision, before[0].event.User.Username, before[0].revision)
		}
		attempts[d.key] = append(attempts[d.key], d)
	}
	for _, b := range bystanders {
		if _, gone := w.removed(objectKey{"managedclusters", "", b}); gone {
			v.add(propInside, "outside: the cluster %s, never deleted, is gone", b)
		}
	}

	for _, td := range tds {
		checkTeardown(v, td, attempts, events, w, users)
	}
	return v
}

func checkTeardown(v verdict, td *teardown, attempts map[objectKey][]deletion, events []auditEvent, w *witness, users []string) {
	ns := td.cluster
	cluster, done := w.removed(objectKey{"managedclusters", "", ns})
	if !done {
		v.add(propComplete, "%s (%s): the teardown did not end: the cluster is still there", ns, td.strategy)
		return
	}
	// The order: the signal work, then (once the gate opened) the add-ons,
	// then the works by cleanup-priority, then the namespace; each starts
	// when what comes before it is gone.
	type member struct {
		key   objectKey
		level int
	}
	const (
		levelSignal = iota
		levelAddons
		levelWorks // + the index of the cleanup-priority group
	)
	members := []member{{objectKey{"manifestworks", ns, signalWork}, levelSignal}}
	for _, a := range td.addons {
		members = append(members, member{objectKey{"managedclusteraddons", ns, a}, levelAddons})
	}
	for name, prio := range td.works {
		members = append(members, member{objectKey{"manifestworks", ns, name}, levelWorks + slices.Index(priorities, prio)})
	}
	slices.SortFunc(members, func(a, b member) int { return cmp.Or(a.level-b.level, strings.Compare(a.key.name, b.key.name)) })
	members = append(members, member{objectKey{"namespaces", "", ns}, levelWorks + len(priorities)})

	gone := map[objectKey]int64{}
	for _, m := range members {
		if r, ok := w.removed(m.key); ok {
			gone[m.key] = r.revision
		} else if m.key.resource != "namespaces" { // no namespace controller runs
			v.add(propComplete, "%s (%s): %s is still there after the teardown", ns, td.strategy, m.key)
		}
	}
	gate, gateOpened := w.removed(objectKey{"configmaps", ns, monitored})
	if !gateOpened {
		v.add(propOrder, "%s (%s): the monitored ConfigMap %s was never removed, yet the teardown ended", ns, td.strategy, monitored)
	}
	for _, m := range members {
		began, ok := w.deleting(m.key)
		if !ok {
			v.add(propComplete, "%s (%s): %s was never deleted", ns, td.strategy, m.key)
			continue
		}
		if len(attempts[m.key]) == 0 && len(attempts[objectKey{m.key.resource, m.key.namespace, ""}]) == 0 {
			v.add(propComplete, "%s (%s): %s was deleted, but not by the operator", ns, td.strategy, m.key)
		}
		// A DELETE that began the deletion returns the object at the
		// revision the deletion began; a later one, at a later revision:
		// it deleted again what an earlier DELETE, perhaps one whose
		// answer the operator never saw, had deleted already.
		for _, d := range attempts[m.key] {
			if d.event.succeeded() && d.revision > began.revision {
				v.add(propOnce, "twice: %s was deleted again by %s (revision %d) after its deletion began at revision %d",
					m.key, d.event.User.Username, d.revision, began.revision)
			}
		}
		if gateOpened && m.level > levelSignal && began.revision < gate.revision {
			v.add(propOrder, "out of order: %s deleted at revision %d while the monitored ConfigMap remained (removed at %d)",
				m.key, began.revision, gate.revision)
		}
		for _, before := range members {
			if before.level >= m.level {
				break
			}
			if g, ok := gone[before.key]; ok && began.revision < g {
				v.add(propOrder, "out of order: %s deleted at revision %d before %s was gone (at %d)", m.key, began.revision, before.key, g)
			}
		}
		if m.key.resource == "manifestworks" {
			checkOrphaned(v, td.strategy, m.key, began.object)
		}
	}
	for _, cm := range []string{monitored, unrelated} {
		if len(attempts[objectKey{"configmaps", ns, cm}]) > 0 {
			v.add(propInside, "%s (%s): the operator deleted ConfigMap %s, which no stage names", ns, td.strategy, cm)
		}
	}

	// Forcing: never under Required or Needless before the timeout; every
	// forced object counted on the cluster by the time its finalizer went.
	forced := map[objectKey]bool{}
	for i := range events {
		e := &events[i]
		if e.namespace() == ns && forcedPatch(e, users) {
			forced[objectKey{e.resource(), ns, e.name()}] = true
		}
	}
	if td.strategy != v1alpha1.RemoveStrategyBestEffort && len(forced) > 0 {
		v.add(propForcing, "%s (%s): the work agent's finalizer was removed from %d object(s) by the operator, before any timeout", ns, td.strategy, len(forced))
	}
	want := map[v1alpha1.RemoveStrategyType]string{
		v1alpha1.RemoveStrategyRequired:   v1alpha1.CompletedReason,
		v1alpha1.RemoveStrategyBestEffort: v1alpha1.ForcedReason,
		v1alpha1.RemoveStrategyNeedless:   v1alpha1.OrphanedReason,
	}[td.strategy]
	reason, message := conditionOf(cluster.object, v1alpha1.ContentDeleteSuccessCondition)
	if !strings.HasSuffix(reason, "/True") && !td.kept {
		// No outcome on a cluster that went with the operator's
		// finalizer: its record has it.
		reason, message = td.outcome+"/True", "the record's outcome"
	}
	if reason != want+"/True" {
		v.add(propComplete, "%s (%s): the teardown ended with ContentDeleteSuccess %s (%s), want %s/True", ns, td.strategy, reason, message, want)
	}
	if td.strategy == v1alpha1.RemoveStrategyBestEffort {
		counted, _ := strconv.Atoi(cluster.object.GetAnnotations()["cleanup.fleetops.dev/forced-objects"])
		switch {
		case counted < len(forced):
			v.add(propForcing, "%s (%s): the cluster counts %d forced object(s), the operator forced %d", ns, td.strategy, counted, len(forced))
		case counted > len(forced):
			v.add(propForcedCount, "%s (%s): the cluster counts %d forced object(s) (%s), the operator forced %d",
				ns, td.strategy, counted, message, len(forced))
		}
	}
}

// checkOrphaned verifies, on a work as its deletion began, that it
// carried the deleteOption the teardown requires and that the agent had
// applied it: Orphan under Needless, whatever the rules say; otherwise
// SelectivelyOrphan naming the manifest the orphaning rule keeps (none for
// the signal work).
func checkOrphaned(v verdict, strategy v1alpha1.RemoveStrategyType, key objectKey, o *unstructured.Unstructured) {
	option, _, _ := unstructured.NestedString(o.Object, "spec", "deleteOption", "propagationPolicy")
	switch {
	case strategy == v1alpha1.RemoveStrategyNeedless:
		if option != "Orphan" {
			v.add(propOrphan, "Needless: %s was deleted with deleteOption %q, not Orphan", key, option)
			return
		}
	case key.name == signalWork:
		return
	default:
		rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "deleteOption", "selectivelyOrphans", "orphaningRules")
		var names []string
		for _, r := range rules {
			m, _ := r.(map[string]any)
			names = append(names, fmt.Sprint(m["resource"], "/", m["name"]))
		}
		if option != "SelectivelyOrphan" || !slices.Contains(names, "configmaps/"+key.name+keepSuffix) {
			v.add(propOrphan, "%s: %s was deleted with deleteOption %q %v, not keeping configmaps/%s%s",
				strategy, key, option, names, key.name, keepSuffix)
			return
		}
	}
	// The first DELETE bumps the generation (it sets deletionTimestamp):
	// the agent applied the one before.
	generation := o.GetGeneration() - 1
	conditions, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		observed, _ := m["observedGeneration"].(int64)
		if m["type"] == "Applied" && m["status"] == "True" && observed >= generation {
			return
		}
	}
	v.add(propOrphan, "%s: %s was deleted before the agent applied its deleteOption %s (generation %d; conditions %v)",
		strategy, key, option, generation, conditions)
}

// report runs one subtest per property, failing with its violations.
func report(t *testing.T, v verdict) {
	for _, prop := range properties {
		t.Run(prop, func(t *testing.T) {
			for _, msg := range v[prop] {
				t.Error(msg)
			}
		})
	}
}
