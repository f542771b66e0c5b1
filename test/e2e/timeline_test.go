package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// A timeline records, from watches, what happens to the objects a scenario
// looks at, and prints it as seconds since the scenario's zero (the
// deletion), so a reader sees the order.
type timeline struct {
	title string
	start time.Time

	mu      sync.Mutex
	ready   bool // the watches have listed what existed when the timeline started
	zero    time.Time
	entries []entry
	facts   map[string][]string // the facts last seen per object
	stop    context.CancelFunc
}

type entry struct {
	at   time.Time
	what string
	// rv is the resourceVersion of the change, 0 for the test's own marks.
	rv int64
}

// watched says which objects a timeline follows and what it notes about them.
type watched struct {
	kind      string
	gvr       schema.GroupVersionResource
	namespace string
	selector  string // a label selector, or metadata.name=<name> as a field selector
	// facts are what is noted about an object besides its creation, its
	// deletion starting and its removal; each fact is printed when it appears.
	facts func(u *unstructured.Unstructured) []string
}

func newTimeline(title string, watches ...watched) *timeline {
	tctx, stop := context.WithCancel(ctx)
	t := &timeline{title: title, start: time.Now(), facts: map[string][]string{}, stop: stop}
	dyn, err := dynamic.NewForConfig(adminCfg)
	Expect(err).NotTo(HaveOccurred())
	var synced []cache.InformerSynced
	for _, w := range watches {
		w := w
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, w.namespace, func(o *metav1.ListOptions) {
			if name, ok := strings.CutPrefix(w.selector, "metadata.name="); ok {
				o.FieldSelector = "metadata.name=" + name
			} else {
				o.LabelSelector = w.selector
			}
		})
		inf := factory.ForResource(w.gvr).Informer()
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { t.observe(w, obj.(*unstructured.Unstructured), false) },
			UpdateFunc: func(_, obj any) {
				t.observe(w, obj.(*unstructured.Unstructured), false)
			},
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if u, ok := obj.(*unstructured.Unstructured); ok {
					t.observe(w, u, true)
				}
			},
		})
		Expect(err).NotTo(HaveOccurred())
		factory.Start(tctx.Done())
		synced = append(synced, inf.HasSynced)
	}
	Expect(cache.WaitForCacheSync(tctx.Done(), synced...)).To(BeTrue())
	t.mu.Lock()
	t.ready = true
	t.mu.Unlock()
	DeferCleanup(t.report)
	return t
}

func (t *timeline) observe(w watched, u *unstructured.Unstructured, deleted bool) {
	key := w.kind + " " + objectName(u)
	var facts []string
	if !deleted {
		facts = append(facts, "exists")
		if u.GetDeletionTimestamp() != nil {
			facts = append(facts, "deleting")
		}
		if w.facts != nil {
			facts = append(facts, w.facts(u)...)
		}
	}
	rv, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	t.mu.Lock()
	defer t.mu.Unlock()
	before, known := t.facts[key]
	t.facts[key] = facts
	now := time.Now()
	if deleted {
		t.entries = append(t.entries, entry{now, key + " gone", rv})
		return
	}
	for _, f := range facts {
		if slices.Contains(before, f) {
			continue
		}
		switch {
		case f == "exists" && !known:
			// Objects there when the timeline started are not news.
			if t.ready {
				t.entries = append(t.entries, entry{now, key + " created", rv})
			}
		case f == "exists":
		case !t.ready:
			// The state of objects when the timeline started.
		default:
			t.entries = append(t.entries, entry{now, key + " " + f, rv})
		}
	}
}

// mark notes a step the test takes.
func (t *timeline) mark(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries = append(t.entries, entry{time.Now(), what, 0})
}

// zeroNow notes the deletion the timeline counts from.
func (t *timeline) zeroNow(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.zero = time.Now()
	t.entries = append(t.entries, entry{t.zero, what, 0})
}

// index returns the position of the first entry containing all the parts,
// or -1.
func (t *timeline) index(parts ...string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, e := range t.entries {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(e.what, p)
		}
		if all {
			return i
		}
	}
	return -1
}

// first returns a copy of the first entry whose text match accepts, or nil.
func (t *timeline) first(match func(what string) bool) *entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries {
		if match(e.what) {
			return &e
		}
	}
	return nil
}

// since returns how long after the zero the first entry containing all the
// parts came.
func (t *timeline) since(parts ...string) time.Duration {
	GinkgoHelper()
	i := t.index(parts...)
	Expect(i).NotTo(Equal(-1), "no %q in the timeline:\n%s", parts, t)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entries[i].at.Sub(t.zero)
}

// before asserts that the change with parts a happened before the one with
// parts b. Two changes of objects are ordered by their resourceVersions, not
// by when the watches delivered them (watches of different resources may
// deliver out of order): the suite's API server has one etcd, whose
// revisions order every change.
func (t *timeline) before(a, b []string) {
	GinkgoHelper()
	Eventually(func() int { return t.index(b...) }).ShouldNot(Equal(-1), "no %q in the timeline:\n%s", b, t)
	ia, ib := t.index(a...), t.index(b...)
	Expect(ia).NotTo(Equal(-1), "no %q in the timeline:\n%s", a, t)
	t.mu.Lock()
	ea, eb := t.entries[ia], t.entries[ib]
	t.mu.Unlock()
	if ea.rv > 0 && eb.rv > 0 {
		Expect(ea.rv).To(BeNumerically("<", eb.rv), "%q is not before %q:\n%s", a, b, t)
		return
	}
	Expect(ia).To(BeNumerically("<", ib), "%q is not before %q:\n%s", a, b, t)
}

func (t *timeline) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	zero := t.zero
	if zero.IsZero() {
		zero = t.start
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (seconds since the deletion)\n", t.title)
	for _, e := range t.entries {
		fmt.Fprintf(&b, "  %7.2f  %s\n", e.at.Sub(zero).Seconds(), e.what)
	}
	return b.String()
}

func (t *timeline) report() {
	t.stop()
	AddReportEntry("timeline", t.String(), ReportEntryVisibilityAlways)
}

func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// Facts of the objects the scenarios watch.

func clusterFacts(u *unstructured.Unstructured) []string {
	var facts []string
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		switch m["type"] {
		case "ContentDeleteSuccess":
			facts = append(facts, fmt.Sprintf("ContentDeleteSuccess=%v %v: %s", m["status"], m["reason"], short(fmt.Sprint(m["message"]))))
		case "ManagedClusterConditionAvailable":
			facts = append(facts, fmt.Sprintf("Available=%v", m["status"]))
		case "Deleting":
			// OCM's gc: what it deleted, or why it could not.
			facts = append(facts, fmt.Sprintf("OCM Deleting=%v %v: %s", m["status"], m["reason"], short(fmt.Sprint(m["message"]))))
		}
	}
	if u.GetDeletionTimestamp() != nil {
		// Who still holds a deleted cluster: each change is one line.
		facts = append(facts, "finalizers ["+strings.Join(u.GetFinalizers(), " ")+"]")
	}
	return facts
}

func namespaceFacts(u *unstructured.Unstructured) []string {
	var facts []string
	if u.GetLabels()[clusterDeletingLabel] == "true" {
		facts = append(facts, "labelled "+clusterDeletingLabel+"=true")
	}
	// The operator's mark, which holds OCM's gc.
	if u.GetLabels()[governedLabel] == "true" {
		facts = append(facts, "marked governed by "+u.GetAnnotations()[governingPolicyAnnotation])
	} else {
		facts = append(facts, "not marked governed")
	}
	return facts
}

func workFacts(u *unstructured.Unstructured) []string {
	policy, _, _ := unstructured.NestedString(u.Object, "spec", "deleteOption", "propagationPolicy")
	if policy == "" {
		return nil
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "deleteOption", "selectivelyOrphans", "orphaningRules")
	var names []string
	for _, r := range rules {
		m, _ := r.(map[string]any)
		names = append(names, fmt.Sprintf("%v/%v/%v", m["resource"], m["namespace"], m["name"]))
	}
	if len(names) > 0 {
		return []string{fmt.Sprintf("deleteOption %s %v", policy, names)}
	}
	return []string{"deleteOption " + policy}
}

// managedFacts notes whether an object on the managed cluster is owned by
// the work agent (an AppliedManifestWork owner reference).
func managedFacts(u *unstructured.Unstructured) []string {
	for _, o := range u.GetOwnerReferences() {
		if o.Kind == "AppliedManifestWork" {
			return nil
		}
	}
	return []string{"not owned by the work agent"}
}

func short(s string) string {
	if len(s) > 150 {
		return s[:150] + "..."
	}
	return s
}
