package cel

import (
	"testing"
	"time"
)

func TestDeadlinesShareAWindow(t *testing.T) {
	var d deadlines
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	atLeast := func(name string, now time.Time, got time.Time) {
		t.Helper()
		if got.Before(now.Add(PerCallTimeout)) {
			t.Fatalf("%s: deadline %s, less than %s after %s", name, got, PerCallTimeout, now)
		}
		if got.After(now.Add(PerCallTimeout + joinWindow)) {
			t.Fatalf("%s: deadline %s, more than %s after %s", name, got, PerCallTimeout+joinWindow, now)
		}
	}
	first := d.context(start)
	dl, ok := first.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	atLeast("first", start, dl)

	later := start.Add(joinWindow - time.Millisecond)
	if d.context(later) != first {
		t.Fatal("an evaluation within the window got a context of its own")
	}
	atLeast("within the window", later, dl)

	next := start.Add(joinWindow)
	second := d.context(next)
	if second == first {
		t.Fatal("an evaluation after the window shares a context that may end too soon")
	}
	dl2, _ := second.Deadline()
	atLeast("next window", next, dl2)
}
