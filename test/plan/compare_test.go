package plan

import (
	"fmt"
	"slices"
	"strings"
)

// key is what must be equal between a plan's write action and a write.
type key struct {
	verb string
	obj  object
}

func (k key) String() string { return k.verb + " " + k.obj.String() }

// actionKey is the write an action makes: a delete of a collection is one
// object of a deletecollection (verb deleteCollection).
func actionKey(a Action) key {
	verb := a.Verb
	if verb == "delete" && a.Collection {
		verb = "deleteCollection"
	}
	return key{verb, objectOf(a.Resource, a.Namespace, a.Name)}
}
func writeKey(w Write) key { return key{w.Verb, w.Object} }

// comparison is the outcome of comparing a plan with the writes of a
// teardown: the problems found (none: they agree) and, for a report, which
// block of the plan each write was matched to.
type comparison struct {
	plan     *Plan
	blocks   []block
	writes   []Write
	matched  []string // per write: the block it belongs to, "" if none
	problems []string
}

func (c *comparison) ok() bool { return len(c.problems) == 0 }

// compare checks that the writes are the plan's write actions: the same
// steps in the same order, in each step the same objects with the same
// verbs, the groups of a step in order and the writes of one group in any
// order (one object's writes in the order the plan lists them). Every
// force must follow at once the record the operator writes on the
// ManagedCluster before it forces (the plan's force implies it), and a
// stamp must write the plan's deleteOption.
func compare(p *Plan, writes []Write) *comparison {
	c := &comparison{plan: p, blocks: expectedBlocks(p), writes: writes, matched: make([]string, len(writes))}
	// The records of forcing go with the forces that follow them; the
	// rest is matched block by block.
	var rest []int // indexes into writes
	for i, w := range writes {
		switch {
		case w.Verb == "recordForcing":
			if i+1 >= len(writes) || writes[i+1].Verb != "force" {
				c.problems = append(c.problems, fmt.Sprintf("write #%d (%s) records a force, but the next write is no force", i+1, w))
			}
		case w.Verb == "force" && (i == 0 || (writes[i-1].Verb != "force" && writes[i-1].Verb != "recordForcing")):
			c.problems = append(c.problems, fmt.Sprintf("write #%d (%s) forces without recording it on the ManagedCluster first", i+1, w))
			rest = append(rest, i)
		default:
			rest = append(rest, i)
		}
	}
	pos := 0
	for _, b := range c.blocks {
		end := min(pos+len(b.actions), len(rest))
		window := rest[pos:end]
		if !c.matchBlock(b, window) {
			return c
		}
		pos = end
	}
	for _, i := range rest[pos:] {
		c.problems = append(c.problems, fmt.Sprintf("write #%d (%s) comes after the plan's last write; %s",
			i+1, writes[i], c.whereInPlan(writeKey(writes[i]))))
	}
	return c
}

// unordered compares the plan's writes and the writes as two multisets,
// whatever their order: every difference at once, where the comparison in
// order stops at the first.
func (c *comparison) unordered() (missing, extra []string) {
	planned := map[key]int{}
	for _, b := range c.blocks {
		for _, a := range b.actions {
			planned[actionKey(a)]++
		}
	}
	for _, w := range c.writes {
		if w.Verb == "recordForcing" {
			continue
		}
		k := writeKey(w)
		if planned[k] > 0 {
			planned[k]--
			continue
		}
		extra = append(extra, k.String())
	}
	for k, n := range planned {
		for range n {
			missing = append(missing, k.String())
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return missing, extra
}

// matchBlock checks the writes of window (indexes into c.writes) against
// one block. On a difference it records the problems and returns false:
// what follows is out of step and not compared.
func (c *comparison) matchBlock(b block, window []int) bool {
	want := map[key]int{}
	for _, a := range b.actions {
		want[actionKey(a)]++
	}
	got := map[key]int{}
	for _, i := range window {
		got[writeKey(c.writes[i])]++
	}
	var missing, extra []string
	for k, n := range want {
		for range n - got[k] {
			missing = append(missing, k.String()+"; "+c.whereWritten(k))
		}
	}
	for _, i := range window {
		k := writeKey(c.writes[i])
		if got[k] > want[k] {
			got[k]--
			extra = append(extra, fmt.Sprintf("#%d %s; %s", i+1, c.writes[i], c.whereInPlan(k)))
		}
	}
	if len(missing)+len(extra) > 0 {
		slices.Sort(missing)
		msg := fmt.Sprintf("%s: the writes differ from the plan's", b.label())
		if len(missing) > 0 {
			msg += "\n      planned, not written here: " + strings.Join(missing, "\n                                 ")
		}
		if len(extra) > 0 {
			msg += "\n      written here, not planned: " + strings.Join(extra, "\n                                 ")
		}
		c.problems = append(c.problems, msg)
		return false
	}
	for _, i := range window {
		c.matched[i] = b.label()
		if j := i - 1; j >= 0 && c.writes[j].Verb == "recordForcing" {
			c.matched[j] = b.label()
		}
	}
	c.checkDetails(b, window)
	return true
}

// checkDetails checks, within a matched block, that one object's writes
// come in the plan's order, and that stamps and forces write what the plan
// says.
func (c *comparison) checkDetails(b block, window []int) {
	verbsOf := func(obj object, fromPlan bool) []string {
		var out []string
		if fromPlan {
			for _, a := range b.actions {
				if actionKey(a).obj == obj {
					out = append(out, actionKey(a).verb)
				}
			}
			return out
		}
		for _, i := range window {
			if c.writes[i].Object == obj {
				out = append(out, c.writes[i].Verb)
			}
		}
		return out
	}
	seen := map[object]bool{}
	for _, a := range b.actions {
		obj := actionKey(a).obj
		if seen[obj] {
			continue
		}
		seen[obj] = true
		if p, w := verbsOf(obj, true), verbsOf(obj, false); !slices.Equal(p, w) {
			c.problems = append(c.problems, fmt.Sprintf("%s: %s: the plan writes %v in this order, the operator wrote %v",
				b.label(), obj, p, w))
		}
	}
	for _, a := range b.actions {
		for _, i := range window {
			w := c.writes[i]
			if writeKey(w) != actionKey(a) {
				continue
			}
			if a.Verb == "stamp" && w.DeleteOption != a.DeleteOption {
				c.problems = append(c.problems, fmt.Sprintf("%s: #%d %s: the plan stamps deleteOption %q", b.label(), i+1, w, a.DeleteOption))
			}
			if (a.Verb == "force" || a.Verb == "removeFinalizer") && a.Finalizer != "" && w.Finalizer != a.Finalizer {
				c.problems = append(c.problems, fmt.Sprintf("%s: #%d %s: the plan removes finalizer %q", b.label(), i+1, w, a.Finalizer))
			}
		}
	}
}

// whereWritten says where, if anywhere, the operator wrote k.
func (c *comparison) whereWritten(k key) string {
	var at []string
	for i, w := range c.writes {
		if writeKey(w) == k {
			at = append(at, fmt.Sprintf("#%d", i+1))
		}
	}
	if len(at) == 0 {
		return "never written"
	}
	return "written as " + strings.Join(at, ", ")
}

// whereInPlan says where, if anywhere, the plan has k.
func (c *comparison) whereInPlan(k key) string {
	var at []string
	for _, b := range c.blocks {
		for _, a := range b.actions {
			if actionKey(a) == k {
				at = append(at, b.label())
			}
		}
	}
	if len(at) == 0 {
		return "not in the plan"
	}
	return "planned in " + strings.Join(at, ", ")
}

// report is the comparison for people: the problems, the plan's writes in
// order, and the operator's writes with the block each one matched.
func (c *comparison) report() string {
	var b strings.Builder
	for _, p := range c.problems {
		fmt.Fprintf(&b, "  - %s\n", p)
	}
	if missing, extra := c.unordered(); len(missing)+len(extra) > 0 {
		fmt.Fprintf(&b, "  whatever the order:\n")
		for _, m := range missing {
			fmt.Fprintf(&b, "    planned, never written: %s\n", m)
		}
		for _, e := range extra {
			fmt.Fprintf(&b, "    written, not planned:   %s\n", e)
		}
	}
	fmt.Fprintf(&b, "  planned writes, block by block:\n")
	if len(c.blocks) == 0 {
		fmt.Fprintf(&b, "    (none)\n")
	}
	for _, bl := range c.blocks {
		keys := make([]string, len(bl.actions))
		for i, a := range bl.actions {
			keys[i] = actionKey(a).String()
		}
		fmt.Fprintf(&b, "    %s: %s\n", bl.label(), strings.Join(keys, "; "))
	}
	fmt.Fprintf(&b, "  the operator's writes, in order:\n")
	if len(c.writes) == 0 {
		fmt.Fprintf(&b, "    (none)\n")
	}
	for i, w := range c.writes {
		where := c.matched[i]
		if where == "" {
			where = "?"
		}
		fmt.Fprintf(&b, "    #%d %s   [%s]\n", i+1, w, where)
	}
	return b.String()
}
