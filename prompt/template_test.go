package prompt

import (
	"slices"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	vars := map[string]any{"city": "Lisbon", "days": 3, "tags": []string{"a"}}
	tests := []struct{ in, want, err string }{
		{"Go to ${city} for ${days} days", "Go to Lisbon for 3 days", ""},
		{"${ city } ${tags}", `Lisbon ["a"]`, ""},
		{"literal $${city} and $5", "literal ${city} and $5", ""},
		{"no vars", "no vars", ""},
		{"${missing}", "", `system_text uses ${missing} but the input has no "missing"`},
		{"${unclosed", "", "unclosed"},
	}
	for _, tt := range tests {
		got, err := Render("system_text", tt.in, vars)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Render(%q) err = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Render(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if v := Vars("a ${x} $${y} ${z}"); !slices.Equal(v, []string{"x", "z"}) {
		t.Errorf("Vars = %v", v)
	}
}
