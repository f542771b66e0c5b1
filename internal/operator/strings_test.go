package operator

import (
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// The table hands out one copy of a string, never one of the caller's
// bytes, shares no long string, and starts afresh when full.
func TestStringTable(t *testing.T) {
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	tab := &stringTable{max: 3}
	a, b := strings.Repeat("ns", 2), strings.Repeat("ns", 2)
	first := tab.share(a)
	if same(first, a) {
		t.Error("the table kept the caller's bytes")
	}
	if !same(tab.share(b), first) {
		t.Error("an equal string got a copy of its own")
	}
	long := strings.Repeat("x", maxSharedLength+1)
	if !same(tab.share(long), long) || len(tab.m) != 1 {
		t.Error("a string longer than a label value was shared")
	}
	for i := range 3 {
		tab.share("c" + strconv.Itoa(i))
	}
	if len(tab.m) != 1 {
		t.Errorf("the full table holds %d strings, want it started afresh with 1", len(tab.m))
	}
	if same(tab.share(strings.Repeat("ns", 2)), first) {
		t.Error("a string of the dropped table is still shared")
	}
}
