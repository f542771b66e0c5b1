package main

import (
	"testing"
	"time"
)

func TestP99(t *testing.T) {
	ms := func(n ...int) (d []time.Duration) {
		for _, v := range n {
			d = append(d, time.Duration(v)*time.Millisecond)
		}
		return d
	}
	var hundred []int
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, i)
	}
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{ms(7), 7 * time.Millisecond},
		{ms(hundred...), 99 * time.Millisecond},
		{ms(append(hundred, 1000)...), 100 * time.Millisecond},
		{ms(append(hundred, 1000, 2000)...), 1000 * time.Millisecond},
	} {
		if got := p99(c.in); got != c.want {
			t.Errorf("p99 of %d samples = %s, want %s", len(c.in), got, c.want)
		}
	}
}
