package registry

import (
	"slices"
	"sync"
	"testing"
)

func TestRegistry(t *testing.T) {
	var r Registry[int]
	if _, ok := r.Get("a"); ok || len(r.Names()) != 0 {
		t.Fatal("an empty registry holds something")
	}
	var wg sync.WaitGroup
	for i, n := range []string{"b", "a", "c"} {
		wg.Go(func() { r.Add(n, i) })
	}
	wg.Wait()
	if !slices.Equal(r.Names(), []string{"a", "b", "c"}) {
		t.Errorf("Names = %v", r.Names())
	}
	if r.Add("a", 9) {
		t.Error("a name was registered twice")
	}
	if v, ok := r.Get("a"); !ok || v != 1 {
		t.Errorf("Get(a) = %d, %v; want the first registration", v, ok)
	}
	n := 0
	for name, v := range r.All() {
		r.Add(name+"x", v) // no deadlock: All ranges over a copy
		n++
	}
	if n != 3 {
		t.Errorf("All gave %d registrations", n)
	}
}
