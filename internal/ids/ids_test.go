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

func TestTwo(t *testing.T) {
	a, b := Two("ses", "run")
	if !regexp.MustCompile(`^ses_[0-9a-f]{16}$`).MatchString(a) || !regexp.MustCompile(`^run_[0-9a-f]{16}$`).MatchString(b) || a[4:] == b[4:] {
		t.Errorf("Two = %q, %q", a, b)
	}
	if n := testing.AllocsPerRun(100, func() { Two("ses", "run") }); n != 1 {
		t.Errorf("Two makes %v allocations; want 1", n)
	}
}

func TestSeeded(t *testing.T) {
	a, b := Seeded("run", 42), Seeded("run", 42)
	if a != b || !regexp.MustCompile(`^run_[0-9a-f]{16}$`).MatchString(a) {
		t.Errorf("Seeded = %q, %q", a, b)
	}
	if Seeded("ses", 42)[4:] == a[4:] || Seeded("run", 43) == a {
		t.Error("seeded ids repeat across prefixes or seeds")
	}
}

func TestDerive(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b []string
		same bool
	}{
		{"the same parts", []string{"a", "bc"}, []string{"a", "bc"}, true},
		{"parts split elsewhere", []string{"ab", "c"}, []string{"a", "bc"}, false},
		{"another part", []string{"a"}, []string{"b"}, false},
		{"an empty part more", []string{"a"}, []string{"a", ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if same := Derive(7, tc.a...) == Derive(7, tc.b...); same != tc.same {
				t.Errorf("Derive(%q) == Derive(%q): %v", tc.a, tc.b, same)
			}
		})
	}
}
