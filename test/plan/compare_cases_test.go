package plan

import (
	"strings"
	"testing"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// These tests check the comparison and the audit log's reading on
// hand-made inputs, without an API server.

const (
	works  = "manifestworks.work.open-cluster-management.io"
	addons = "managedclusteraddons.addon.open-cluster-management.io"
	mcs    = "managedclusters.cluster.open-cluster-management.io"
)

func act(verb, resource, namespace, name string, group int) Action {
	return Action{Verb: verb, Resource: resource, Namespace: namespace, Name: name, Group: group}
}

// wr is a write as the audit log's reading gives it: a force and a
// removeFinalizer name the finalizer they remove.
func wr(verb, resource, namespace, name string) Write {
	w := Write{Verb: verb, Object: objectOf(resource, namespace, name)}
	switch verb {
	case "force":
		w.Finalizer = v1alpha1.WorkAgentFinalizer
	case "removeFinalizer":
		w.Finalizer = v1alpha1.ClusterCleanupFinalizer
	}
	return w
}

// samplePlan is a BestEffort teardown of c1 on an unavailable cluster: the
// signal work forced, a gate, two add-ons, works in two cleanup-priority
// groups (the second forced), the namespace, the finalizer.
func samplePlan() *Plan {
	return &Plan{Cluster: "c1", Policy: "p", PolicyGeneration: 1, Strategy: "BestEffort", Steps: []Step{
		{Kind: "orphaning", State: "next", Actions: []Action{{Verb: "keep", Resource: works, Namespace: "c1", Name: "w1", For: "no rule orphans"}}},
		{Kind: "signal", State: "later", Actions: []Action{
			act("label", "namespaces", "", "c1", 0),
			act("delete", works, "c1", "alive", 0),
			{Verb: "force", Resource: works, Namespace: "c1", Name: "alive", Finalizer: "cluster.open-cluster-management.io/manifest-work-cleanup"},
		}},
		{Kind: "gate", State: "later", Actions: []Action{{Verb: "wait", Resource: "configmaps", Namespace: "c1", Name: "app", For: "its controller"}}},
		{Kind: "stage", Name: "addons", State: "later", Actions: []Action{
			act("delete", addons, "c1", "a1", 0), act("delete", addons, "c1", "a2", 0),
		}},
		{Kind: "stage", Name: "works", State: "later", Actions: []Action{
			act("delete", works, "c1", "w2", 1), act("force", works, "c1", "w2", 1),
			act("delete", works, "c1", "w1", 0), act("delete", works, "c1", "w3", 0),
			act("force", works, "c1", "w1", 0), act("force", works, "c1", "w3", 0),
		}},
		{Kind: "namespace", State: "later", Actions: []Action{act("delete", "namespaces", "c1", "c1", 0)}},
		{Kind: "finish", State: "later", Actions: []Action{act("removeFinalizer", mcs, "", "c1", 0)}},
	}}
}

// sampleWrites are the writes that carry samplePlan out.
func sampleWrites() []Write {
	return []Write{
		wr("label", "namespaces", "", "c1"),
		wr("delete", works, "c1", "alive"),
		wr("recordForcing", mcs, "", "c1"),
		wr("force", works, "c1", "alive"),
		wr("delete", addons, "c1", "a2"), // a group in any order
		wr("delete", addons, "c1", "a1"),
		wr("delete", works, "c1", "w3"),
		wr("delete", works, "c1", "w1"),
		wr("recordForcing", mcs, "", "c1"),
		wr("force", works, "c1", "w3"),
		wr("force", works, "c1", "w1"),
		wr("delete", works, "c1", "w2"),
		wr("recordForcing", mcs, "", "c1"),
		wr("force", works, "c1", "w2"),
		wr("delete", "namespaces", "", "c1"),
		wr("removeFinalizer", mcs, "", "c1"),
	}
}

func TestCompareAgrees(t *testing.T) {
	c := compare(samplePlan(), sampleWrites())
	if !c.ok() {
		t.Fatalf("the writes carry the plan out, but the comparison says:\n%s", c.report())
	}
	for i, m := range c.matched {
		if m == "" {
			t.Errorf("write #%d (%s) was matched to no block", i+1, c.writes[i])
		}
	}
}

// TestCompareCollection: a group the plan deletes as a collection agrees
// with a deletecollection of exactly its objects, and with nothing else.
func TestCompareCollection(t *testing.T) {
	collectAddons := func() *Plan {
		p := samplePlan()
		for i := range p.Steps[3].Actions {
			p.Steps[3].Actions[i].Collection = true
		}
		return p
	}
	collected := func(names ...string) []Write {
		ws := sampleWrites()
		var out []Write
		out = append(out, ws[:4]...)
		for _, n := range names {
			out = append(out, wr("deleteCollection", addons, "c1", n))
		}
		return append(out, ws[6:]...)
	}
	if c := compare(collectAddons(), collected("a2", "a1")); !c.ok() {
		t.Fatalf("a deletecollection of the group carries the plan out, but the comparison says:\n%s", c.report())
	}
	for _, tc := range []struct {
		name   string
		plan   *Plan
		writes []Write
		want   string
	}{
		{name: "a planned collection deleted one by one", plan: collectAddons(), writes: sampleWrites(),
			want: "planned, not written here: deleteCollection " + addons + " c1/a1"},
		{name: "a collection the plan does not have", plan: samplePlan(), writes: collected("a1", "a2"),
			want: "written here, not planned: #5 deleteCollection " + addons + " c1/a1"},
		{name: "a collection that deleted an object more", plan: collectAddons(), writes: collected("a1", "a2", "a3"),
			want: "deleteCollection " + addons + " c1/a3; not in the plan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compare(tc.plan, tc.writes)
			if c.ok() {
				t.Fatalf("the comparison agrees")
			}
			if r := c.report(); !strings.Contains(r, tc.want) {
				t.Fatalf("the report does not say %q:\n%s", tc.want, r)
			}
		})
	}
}

func TestCompareFails(t *testing.T) {
	swap := func(ws []Write, i, j int) []Write { ws[i], ws[j] = ws[j], ws[i]; return ws }
	drop := func(ws []Write, i int) []Write { return append(ws[:i], ws[i+1:]...) }
	cases := []struct {
		name   string
		plan   func(*Plan)
		writes func([]Write) []Write
		want   string // in the report
	}{
		{name: "a later group before an earlier one", writes: func(ws []Write) []Write {
			// w2 (group 1) deleted before w3 (group 0).
			return swap(ws, 6, 11)
		}, want: "written here, not planned: #7 delete " + works + " c1/w2"},
		{name: "a stage before the signal", writes: func(ws []Write) []Write {
			return append([]Write{wr("delete", addons, "c1", "a1")}, drop(ws, 5)...)
		}, want: "signal (step 2, group 0)"},
		{name: "a planned write missing", writes: func(ws []Write) []Write { return drop(ws, 14) }, // the namespace
			want: "planned, not written here: delete namespaces c1; never written"},
		{name: "a write the plan does not have", writes: func(ws []Write) []Write {
			return append(ws[:15:15], wr("create", works, "c1", "alive"), ws[15])
		}, want: "create " + works + " c1/alive; not in the plan"},
		{name: "every difference, whatever the order", writes: func(ws []Write) []Write {
			ws = drop(ws, 14) // the namespace's delete
			return append(ws[:1:1], append([]Write{wr("update", works, "c1", "w1")}, ws[1:]...)...)
		}, want: "    planned, never written: delete namespaces c1\n    written, not planned:   update " + works + " c1/w1\n"},
		{name: "a write after the last step", writes: func(ws []Write) []Write {
			return append(ws, wr("patch", mcs, "", "c1"))
		}, want: "comes after the plan's last write"},
		{name: "a write twice", writes: func(ws []Write) []Write {
			return append(ws[:2:2], append([]Write{wr("delete", works, "c1", "alive")}, ws[2:]...)...)
		}, want: "written here, not planned"},
		{name: "a force not recorded first", writes: func(ws []Write) []Write { return drop(ws, 2) },
			want: "forces without recording it"},
		{name: "a record of forcing with no force", writes: func(ws []Write) []Write {
			return append(ws[:15:15], wr("recordForcing", mcs, "", "c1"), ws[15])
		}, want: "the next write is no force"},
		{name: "force before delete of one object", writes: func(ws []Write) []Write {
			// In the works' group 1: record, force w2, delete w2.
			ws[11], ws[12], ws[13] = wr("recordForcing", mcs, "", "c1"), wr("force", works, "c1", "w2"), wr("delete", works, "c1", "w2")
			return ws
		}, want: "the plan writes [delete force] in this order, the operator wrote [force delete]"},
		{name: "a stamp of another deleteOption", plan: func(p *Plan) {
			p.Steps[0].Actions = append(p.Steps[0].Actions, Action{Verb: "stamp", Resource: works, Namespace: "c1", Name: "w1", DeleteOption: "Orphan"})
		}, writes: func(ws []Write) []Write {
			return append([]Write{{Verb: "stamp", Object: objectOf(works, "c1", "w1"), DeleteOption: "SelectivelyOrphan"}}, ws...)
		}, want: `the plan stamps deleteOption "Orphan"`},
		{name: "a force of another finalizer", plan: func(p *Plan) { p.Steps[1].Actions[2].Finalizer = "example.com/other" },
			writes: func(ws []Write) []Write { return ws }, want: `the plan removes finalizer "example.com/other"`},
		{name: "writes in a dry run", plan: func(p *Plan) { p.DryRun = true },
			writes: func(ws []Write) []Write { return ws[:1] }, want: "comes after the plan's last write"},
		{name: "writes for a held plan", plan: func(p *Plan) { p.Held = "no CleanupPolicy governs the cluster" },
			writes: func(ws []Write) []Write { return ws[:1] }, want: "comes after the plan's last write"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := samplePlan()
			if tc.plan != nil {
				tc.plan(p)
			}
			c := compare(p, tc.writes(sampleWrites()))
			if c.ok() {
				t.Fatalf("the comparison agrees, but must not:\n%s", c.report())
			}
			if r := c.report(); !strings.Contains(r, tc.want) {
				t.Fatalf("the report does not say %q:\n%s", tc.want, r)
			}
		})
	}
}

func TestCompareIgnores(t *testing.T) {
	t.Run("steps done and actions that do not write", func(t *testing.T) {
		p := samplePlan()
		p.Steps = append([]Step{{Kind: "orphaning", State: "done", Actions: []Action{act("stamp", works, "c1", "w9", 0)}}}, p.Steps...)
		if c := compare(p, sampleWrites()); !c.ok() {
			t.Fatalf("a done step's writes were expected again:\n%s", c.report())
		}
	})
	t.Run("a held plan and no writes", func(t *testing.T) {
		p := samplePlan()
		p.Held = "held: the policy does not compile"
		if c := compare(p, nil); !c.ok() {
			t.Fatalf("a held plan writes nothing:\n%s", c.report())
		}
	})
	t.Run("a dry run and no writes", func(t *testing.T) {
		p := samplePlan()
		p.DryRun = true
		if c := compare(p, nil); !c.ok() {
			t.Fatalf("a dry run writes nothing:\n%s", c.report())
		}
	})
	t.Run("a namespace for a cluster-scoped object", func(t *testing.T) {
		p := samplePlan()
		p.Steps[6].Actions[0].Namespace = "c1"
		if c := compare(p, sampleWrites()); !c.ok() {
			t.Fatalf("the ManagedCluster has no namespace:\n%s", c.report())
		}
	})
}

func TestPlanDecode(t *testing.T) {
	if _, err := decodePlan([]byte(`{"cluster":"c1","policy":"p","strategy":"Required","gate":{}}`)); err == nil ||
		!strings.Contains(err.Error(), "does not print the Plan contract") {
		t.Fatalf("a plan without steps must be refused, got %v", err)
	}
	p, err := decodePlan([]byte(`{"cluster":"c1","held":"no CleanupPolicy governs the cluster"}`))
	if err != nil || p.Held == "" {
		t.Fatalf("a held plan without steps is a plan: %v", err)
	}
	p, err = decodePlan([]byte(`{"cluster":"c1","policy":"p","strategy":"Needless","steps":[
	  {"kind":"orphaning","state":"next","actions":[{"verb":"stamp","resource":"` + works + `","namespace":"c1","name":"w1","group":0,"deleteOption":"Orphan","orphaned":[]}]},
	  {"kind":"finish","state":"later","actions":[{"verb":"removeFinalizer","resource":"` + mcs + `","name":"c1","finalizer":"cleanup.fleetops.dev/cluster-cleanup"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	bs := expectedBlocks(p)
	if len(bs) != 2 || bs[0].actions[0].DeleteOption != "Orphan" || bs[1].actions[0].Finalizer == "" {
		t.Fatalf("blocks: %+v", bs)
	}
}

// auditLines are audit events as the API server writes them (Request
// level), one per line.
const auditLines = `{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"namespaces","name":"c1","apiVersion":"v1"},"responseStatus":{"code":200},"requestObject":{"metadata":{"labels":{"cleanup.fleetops.dev/cluster-deleting":"true"}}},"responseObject":{"metadata":{"name":"c1","resourceVersion":"5"}},"requestReceivedTimestamp":"2026-01-01T00:00:01.000001Z"}
{"stage":"ResponseComplete","verb":"delete","user":{"username":"op"},"objectRef":{"resource":"manifestworks","namespace":"c1","name":"alive","apiGroup":"work.open-cluster-management.io"},"responseStatus":{"code":200},"requestObject":{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/__internal","preconditions":{"uid":"u"}},"requestReceivedTimestamp":"2026-01-01T00:00:01.000003Z"}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"managedclusters","name":"c1","apiGroup":"cluster.open-cluster-management.io"},"responseStatus":{"code":200},"requestObject":{"metadata":{"annotations":{"cleanup.fleetops.dev/forced-objects":"1","cleanup.fleetops.dev/forcing":"manifestworks/alive"},"resourceVersion":"9"}},"requestReceivedTimestamp":"2026-01-01T00:00:01.000004Z"}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"manifestworks","namespace":"c1","name":"alive","apiGroup":"work.open-cluster-management.io"},"responseStatus":{"code":200},"requestObject":[{"op":"test","path":"/metadata/finalizers/0","value":"cluster.open-cluster-management.io/manifest-work-cleanup"},{"op":"remove","path":"/metadata/finalizers/0"}],"requestReceivedTimestamp":"2026-01-01T00:00:01.000005Z"}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"managedclusters","name":"c1","apiGroup":"cluster.open-cluster-management.io","subresource":"status"},"responseStatus":{"code":200},"requestObject":{"status":{}},"requestReceivedTimestamp":"2026-01-01T00:00:01.000006Z"}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"manifestworks","namespace":"c1","name":"w1","apiGroup":"work.open-cluster-management.io"},"responseStatus":{"code":200},"requestObject":{"apiVersion":"work.open-cluster-management.io/v1","kind":"ManifestWork","metadata":{"name":"w1","namespace":"c1","uid":"u1"},"spec":{"deleteOption":{"propagationPolicy":"Orphan"}}},"requestReceivedTimestamp":"2026-01-01T00:00:01.000007Z"}
{"stage":"ResponseComplete","verb":"delete","user":{"username":"op"},"objectRef":{"resource":"manifestworks","namespace":"c1","name":"w1","apiGroup":"work.open-cluster-management.io"},"responseStatus":{"code":409},"requestReceivedTimestamp":"2026-01-01T00:00:01.000008Z"}
{"stage":"ResponseComplete","verb":"delete","user":{"username":"agent"},"objectRef":{"resource":"manifestworks","namespace":"c1","name":"w2","apiGroup":"work.open-cluster-management.io"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:01.000009Z"}
{"stage":"ResponseComplete","verb":"delete","user":{"username":"op"},"objectRef":{"resource":"manifestworks","namespace":"c2","name":"w1","apiGroup":"work.open-cluster-management.io"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:01.000010Z"}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"namespaces","name":"c1","apiVersion":"v1"},"responseStatus":{"code":200},"requestObject":{"metadata":{"labels":{"cleanup.fleetops.dev/cluster-deleting":"true"}}},"responseObject":{"metadata":{"name":"c1","resourceVersion":"5"}},"requestReceivedTimestamp":"2026-01-01T00:00:01.000012Z"}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"namespaces","name":"c1","apiVersion":"v1"},"responseStatus":{"code":200},"requestObject":{"metadata":{"labels":{"cleanup.fleetops.dev/cluster-deleting":null}}},"responseObject":{"metadata":{"name":"c1","resourceVersion":"7"}},"requestReceivedTimestamp":"2026-01-01T00:00:01.000012Z"}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"managedclusters","name":"c1","apiGroup":"cluster.open-cluster-management.io"},"responseStatus":{"code":200},"requestObject":[{"op":"test","path":"/metadata/finalizers/1","value":"cleanup.fleetops.dev/cluster-cleanup"},{"op":"remove","path":"/metadata/finalizers/1"},{"op":"remove","path":"/metadata/annotations/cleanup.fleetops.dev~1policy"}],"requestReceivedTimestamp":"2026-01-01T00:00:01.000013Z"}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"managedclusters","name":"c1","apiGroup":"cluster.open-cluster-management.io"},"responseStatus":{"code":200},"requestObject":{"metadata":{"annotations":{"cleanup.fleetops.dev/policy":"p"}}},"requestReceivedTimestamp":"2026-01-01T00:00:01.000011Z"}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"managedclusters","name":"c1","apiGroup":"cluster.open-cluster-management.io"},"responseStatus":{"code":200},"requestObject":{"metadata":{"annotations":{"cleanup.fleetops.dev/unconfirmed-orphans":"manifestworks/w1"}}},"requestReceivedTimestamp":"2026-01-01T00:00:01.000002Z"}
{"stage":"ResponseComplete","verb":"deletecollection","user":{"username":"op"},"objectRef":{"resource":"manifestworks","namespace":"c1","apiGroup":"work.open-cluster-management.io"},"responseStatus":{"code":200},"responseObject":{"kind":"ManifestWorkList","items":[{"metadata":{"name":"w3"}},{"metadata":{"name":"w4"}}]},"requestReceivedTimestamp":"2026-01-01T00:00:01.000014Z"}
{"stage":"ResponseComplete","verb":"delete","user":{"username":"op"},"objectRef":{"resource":"managedclusteraddons","namespace":"c1","name":"a1","apiGroup":"addon.open-cluster-management.io"},"responseStatus":{"code":200},"requestObj`

func TestAuditWrites(t *testing.T) {
	events, err := parseAudit([]byte(auditLines))
	if err != nil {
		t.Fatal(err)
	}
	got := writesTo(events, "op", "c1")
	want := []string{
		"label namespaces c1",
		"recordUnconfirmed " + mcs + " c1", // received second: the order is of receipt, not of the log
		"delete " + works + " c1/alive",
		"recordForcing " + mcs + " c1",
		"force " + works + " c1/alive finalizer=cluster.open-cluster-management.io/manifest-work-cleanup",
		// the status patch, the failed delete, the agent's delete and c2's are no writes of c1's teardown
		"stamp " + works + " c1/w1 deleteOption=Orphan",
		`patch ` + mcs + ` c1 {"metadata":{"annotations":{"cleanup.fleetops.dev/policy":"p"}}}`,
		"label namespaces c1 (changed nothing: the resourceVersion its write #1 left)",
		"unlabel namespaces c1",
		"removeFinalizer " + mcs + " c1 finalizer=cleanup.fleetops.dev/cluster-cleanup",
		// a deletecollection: one write per object its response lists
		"deleteCollection " + works + " c1/w3",
		"deleteCollection " + works + " c1/w4",
		// the last line is not complete yet
	}
	if len(got) != len(want) {
		t.Fatalf("got %d writes, want %d:\n%v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("write #%d: got %q, want %q", i+1, got[i], want[i])
		}
	}
}
