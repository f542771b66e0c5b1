package fuzzrand

import "testing"

// TestNew: the first draws are the bytes themselves, the same bytes give the
// same draws past their end, and other bytes give others.
func TestNew(t *testing.T) {
	data := []byte{1, 0, 0, 0, 0, 0, 0, 0, 2}
	r := New(data)
	if got := r.Uint64(); got != 1 {
		t.Fatalf("first draw %d, want 1", got)
	}
	if got := r.Uint64(); got != 2 {
		t.Fatalf("second draw %d, want 2 (the last byte, zero-padded)", got)
	}
	a, b, c := New(data), New(data), New([]byte{3})
	for range 2 {
		a.Uint64()
		b.Uint64()
	}
	c.Uint64()
	x, y, z := a.Uint64(), b.Uint64(), c.Uint64()
	if x != y {
		t.Fatalf("the same bytes gave %d and %d past their end", x, y)
	}
	if x == z {
		t.Fatalf("other bytes gave the same draw %d past their end", x)
	}
}
