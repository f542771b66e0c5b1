package crash

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// history is a teardown as the audit log and the witness record it.
type history struct {
	events []auditEvent
	w      *witness
	td     *teardown
}

func deleteEvent(user string, key objectKey, code int, revision int64) auditEvent {
	var e auditEvent
	e.Stage, e.Verb = "ResponseComplete", "delete"
	e.User.Username = user
	e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name = key.resource, key.namespace, key.name
	if key.resource == "namespaces" {
		e.ObjectRef.Namespace = key.name
	}
	e.ResponseStatus.Code = code
	e.ResponseObject = fmt.Appendf(nil, `{"metadata":{"resourceVersion":"%d"}}`, revision)
	return e
}

// forceEvent is the operator's removal of the work agent's finalizer.
func forceEvent(key objectKey) auditEvent {
	e := deleteEvent(operatorUser, key, 200, 0)
	e.Verb = "patch"
	e.RequestObject = fmt.Appendf(nil, `[{"op":"test","path":"/metadata/finalizers/0","value":%q},{"op":"remove","path":"/metadata/finalizers/0"}]`,
		v1alpha1.WorkAgentFinalizer)
	return e
}

func object(u map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: u}
}

// cleanHistory is a Required teardown of cluster c1 as the contract wants
// it, one step per revision.
func cleanHistory(strategy v1alpha1.RemoveStrategyType) *history {
	h := &history{
		w: &witness{started: map[objectKey]removal{}, gone: map[objectKey]removal{}},
		td: &teardown{cluster: "c1", strategy: strategy, addons: []string{"addon-0"},
			works: map[string]string{"work-punset-0": "", "work-p10-0": "10"}},
	}
	work := func(name string) *unstructured.Unstructured {
		option := map[string]any{"propagationPolicy": "Orphan"}
		if strategy != v1alpha1.RemoveStrategyNeedless {
			option = map[string]any{"propagationPolicy": "SelectivelyOrphan", "selectivelyOrphans": map[string]any{
				"orphaningRules": []any{map[string]any{"resource": "configmaps", "namespace": "default", "name": name + keepSuffix}}}}
		}
		return object(map[string]any{
			"metadata": map[string]any{"generation": int64(3)},
			"spec":     map[string]any{"deleteOption": option},
			"status": map[string]any{"conditions": []any{map[string]any{
				"type": "Applied", "status": "True", "observedGeneration": int64(2)}}},
		})
	}
	rev := int64(10)
	forced := 0
	step := func(key objectKey, deleted bool) {
		if deleted {
			h.events = append(h.events, deleteEvent(operatorUser, key, 200, rev))
			h.w.started[key] = removal{revision: rev, object: work(key.name)}
		}
		if strategy == v1alpha1.RemoveStrategyBestEffort && key.resource == "manifestworks" {
			h.events = append(h.events, forceEvent(key))
			forced++
		}
		rev++
		if key.resource != "namespaces" {
			h.w.gone[key] = removal{revision: rev, object: work(key.name)}
		}
		rev++
	}
	step(objectKey{"manifestworks", "c1", signalWork}, true)
	step(objectKey{"configmaps", "c1", monitored}, false)
	step(objectKey{"managedclusteraddons", "c1", "addon-0"}, true)
	step(objectKey{"manifestworks", "c1", "work-punset-0"}, true)
	step(objectKey{"manifestworks", "c1", "work-p10-0"}, true)
	step(objectKey{"namespaces", "", "c1"}, true)
	reason := map[v1alpha1.RemoveStrategyType]string{
		v1alpha1.RemoveStrategyRequired: v1alpha1.CompletedReason, v1alpha1.RemoveStrategyNeedless: v1alpha1.OrphanedReason,
		v1alpha1.RemoveStrategyBestEffort: v1alpha1.ForcedReason,
	}[strategy]
	h.w.gone[objectKey{"managedclusters", "", "c1"}] = removal{revision: rev, object: object(map[string]any{
		"metadata": map[string]any{"name": "c1", "annotations": map[string]any{
			"cleanup.fleetops.dev/forced-objects": fmt.Sprint(forced)}},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": v1alpha1.ContentDeleteSuccessCondition, "status": "True", "reason": reason, "message": "done"}}},
	})}
	return h
}

// TestChecksFail proves the checks can fail: each broken history violates
// the property it breaks, and only that one.
func TestChecksFail(t *testing.T) {
	// swap exchanges the times two objects were deleted and gone.
	swap := func(h *history, a, b objectKey) {
		for _, m := range []map[objectKey]removal{h.w.started, h.w.gone} {
			ra, rb := m[a], m[b]
			ra.revision, rb.revision = rb.revision, ra.revision
			m[a], m[b] = ra, rb
		}
		var ia, ib int
		for i, e := range h.events {
			switch keyOf(&e) {
			case a:
				ia = i
			case b:
				ib = i
			}
		}
		h.events[ia].ResponseObject, h.events[ib].ResponseObject = h.events[ib].ResponseObject, h.events[ia].ResponseObject
	}
	for _, tc := range []struct {
		name     string
		strategy v1alpha1.RemoveStrategyType
		breakIt  func(h *history)
		want     string // the property violated; "" for none
	}{
		{"a clean Required teardown", v1alpha1.RemoveStrategyRequired, func(*history) {}, ""},
		{"a clean Needless teardown", v1alpha1.RemoveStrategyNeedless, func(*history) {}, ""},
		{"works before add-ons", v1alpha1.RemoveStrategyRequired, func(h *history) {
			swap(h, objectKey{"managedclusteraddons", "c1", "addon-0"}, objectKey{"manifestworks", "c1", "work-p10-0"})
		}, propOrder},
		{"priority 10 before unset", v1alpha1.RemoveStrategyRequired, func(h *history) {
			swap(h, objectKey{"manifestworks", "c1", "work-punset-0"}, objectKey{"manifestworks", "c1", "work-p10-0"})
		}, propOrder},
		{"an add-on before the gate opened", v1alpha1.RemoveStrategyRequired, func(h *history) {
			key := objectKey{"configmaps", "c1", monitored}
			h.w.gone[key] = removal{revision: h.w.started[objectKey{"managedclusteraddons", "c1", "addon-0"}].revision + 1}
		}, propOrder},
		{"a work deleted again", v1alpha1.RemoveStrategyRequired, func(h *history) {
			key := objectKey{"manifestworks", "c1", "work-p10-0"}
			h.events = append(h.events, deleteEvent(operatorUser, key, 200, h.w.gone[key].revision-1))
		}, propOnce},
		{"a work deleted again after an answer never seen", v1alpha1.RemoveStrategyRequired, func(h *history) {
			key := objectKey{"manifestworks", "c1", "work-p10-0"}
			for i, e := range h.events {
				if keyOf(&e) == key {
					h.events[i].ResponseStatus.Code = 504
					h.events = append(h.events, deleteEvent(operatorUser, key, 200, h.w.started[key].revision+1))
					break
				}
			}
		}, propOnce},
		{"a work of another cluster", v1alpha1.RemoveStrategyRequired, func(h *history) {
			h.events = append(h.events, deleteEvent(operatorUser, objectKey{"manifestworks", "c2", "app"}, 200, 99))
		}, propInside},
		{"the monitored ConfigMap", v1alpha1.RemoveStrategyRequired, func(h *history) {
			h.events = append(h.events, deleteEvent(operatorUser, objectKey{"configmaps", "c1", monitored}, 200, 99))
		}, propInside},
		{"another namespace", v1alpha1.RemoveStrategyRequired, func(h *history) {
			h.events = append(h.events, deleteEvent(operatorUser, objectKey{"namespaces", "", "default"}, 200, 99))
		}, propInside},
		{"the outcome in the record alone, the cluster gone with the operator's finalizer", v1alpha1.RemoveStrategyRequired, func(h *history) {
			unstructured.RemoveNestedField(h.w.gone[objectKey{"managedclusters", "", "c1"}].object.Object, "status")
			h.td.outcome = v1alpha1.CompletedReason
		}, ""},
		{"no outcome, on the cluster or in the record", v1alpha1.RemoveStrategyRequired, func(h *history) {
			unstructured.RemoveNestedField(h.w.gone[objectKey{"managedclusters", "", "c1"}].object.Object, "status")
		}, propComplete},
		{"no outcome on a cluster another finalizer kept", v1alpha1.RemoveStrategyRequired, func(h *history) {
			unstructured.RemoveNestedField(h.w.gone[objectKey{"managedclusters", "", "c1"}].object.Object, "status")
			h.td.outcome, h.td.kept = v1alpha1.CompletedReason, true
		}, propComplete},
		{"another outcome in the record", v1alpha1.RemoveStrategyRequired, func(h *history) {
			unstructured.RemoveNestedField(h.w.gone[objectKey{"managedclusters", "", "c1"}].object.Object, "status")
			h.td.outcome = v1alpha1.ForcedReason
		}, propComplete},
		{"the cluster still there", v1alpha1.RemoveStrategyRequired, func(h *history) {
			delete(h.w.gone, objectKey{"managedclusters", "", "c1"})
		}, propComplete},
		{"a work deleted by someone else", v1alpha1.RemoveStrategyRequired, func(h *history) {
			key := objectKey{"manifestworks", "c1", "work-p10-0"}
			h.events = slices.DeleteFunc(h.events, func(e auditEvent) bool { return keyOf(&e) == key })
		}, propComplete},
		{"Needless, a work deleted without Orphan", v1alpha1.RemoveStrategyNeedless, func(h *history) {
			key := objectKey{"manifestworks", "c1", "work-p10-0"}
			unstructured.RemoveNestedField(h.w.started[key].object.Object, "spec", "deleteOption")
		}, propOrphan},
		{"Needless, a work deleted before the agent applied Orphan", v1alpha1.RemoveStrategyNeedless, func(h *history) {
			key := objectKey{"manifestworks", "c1", "work-punset-0"}
			_ = unstructured.SetNestedField(h.w.started[key].object.Object, int64(5), "metadata", "generation")
		}, propOrphan},
		{"Required, a work deleted unstamped", v1alpha1.RemoveStrategyRequired, func(h *history) {
			key := objectKey{"manifestworks", "c1", "work-p10-0"}
			unstructured.RemoveNestedField(h.w.started[key].object.Object, "spec", "deleteOption")
		}, propOrphan},
		{"Required, a work deleted before the agent applied its stamp", v1alpha1.RemoveStrategyRequired, func(h *history) {
			key := objectKey{"manifestworks", "c1", "work-p10-0"}
			_ = unstructured.SetNestedField(h.w.started[key].object.Object, int64(5), "metadata", "generation")
		}, propOrphan},
		{"Required, forced", v1alpha1.RemoveStrategyRequired, func(h *history) {
			h.events = append(h.events, forceEvent(objectKey{"manifestworks", "c1", "work-p10-0"}))
		}, propForcing},
		{"a clean BestEffort teardown", v1alpha1.RemoveStrategyBestEffort, func(*history) {}, ""},
		{"BestEffort, a forced object not counted", v1alpha1.RemoveStrategyBestEffort, func(h *history) {
			h.w.gone[objectKey{"managedclusters", "", "c1"}].object.SetAnnotations(map[string]string{"cleanup.fleetops.dev/forced-objects": "2"})
		}, propForcing},
		{"BestEffort, forced objects counted twice", v1alpha1.RemoveStrategyBestEffort, func(h *history) {
			h.w.gone[objectKey{"managedclusters", "", "c1"}].object.SetAnnotations(map[string]string{"cleanup.fleetops.dev/forced-objects": "5"})
		}, propForcedCount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cleanHistory(tc.strategy)
			tc.breakIt(h)
			v := checkTeardowns(h.events, h.w, []*teardown{h.td}, nil, []string{operatorUser})
			if tc.want != "" {
				t.Logf("%s: %q", tc.want, v[tc.want])
			}
			for _, prop := range properties {
				if got := len(v[prop]); (prop == tc.want) != (got > 0) {
					t.Errorf("property %s: %d violation(s) %q", prop, got, v[prop])
				}
			}
		})
	}
}
