package ids

import (
	"regexp"
	"testing"
)

func TestNew(t *testing.T) {
	shape := regexp.MustCompile(`^run_[0-9a-f]{16}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := New("run")
		if !shape.MatchString(id) || seen[id] {
			t.Fatalf("New = %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
}
