package liquid

import (
	"slices"
	"testing"
)

// TestVars: the scan names every parameter a template reads, in order,
// and only those: in conditions joined by and/or, in filters' arguments,
// on an assign's right side, as an index; not fields, filters,
// keywords, strings, the template's own names, nor a comment's or a raw
// block's text.
func TestVars(t *testing.T) {
	for _, tc := range []struct {
		text  string
		names []string
		tests []string // of names, those only tested
	}{
		{"{{ name | upcase }}", []string{"name"}, nil},
		{"{% if a and b.c or d contains 'x' %}{% endif %}", []string{"a", "b", "d"}, []string{"a", "b", "d"}},
		{"{% if a %}{% elsif b %}{% else %}{{ c }}{% endif %}", []string{"a", "b", "c"}, []string{"a", "b"}},
		{"{{ x | default: y | replace: 'a', z }}", []string{"x", "y", "z"}, nil},
		{"{% assign g = greeting | upcase %}{{ g }}", []string{"greeting"}, nil},
		{"{% capture c %}{{ inner }}{% endcapture %}{{ c }}", []string{"inner"}, nil},
		{"{% for i in items limit: n offset: 2 reversed %}{{ i.name }}{{ forloop.index }}{% endfor %}", []string{"items", "n"}, nil},
		{"{% for i in (1..count) %}{{ i }}{% endfor %}", []string{"count"}, nil},
		{"{% comment %}{{ hidden }}{% endcomment %}{% raw %}{{ shown_as_is }}{% endraw %}{{ seen }}", []string{"seen"}, nil},
		{"{{ user[key] }}{{ user['literal'] }}", []string{"user", "key", "user"}, nil},
		{"{% case k %}{% when v, \"s\" %}x{% endcase %}", []string{"k", "v"}, []string{"k", "v"}},
		{"{% unless off %}{{ 'a string with no_var in it' }}{{ 3.5 }}{% endunless %}", []string{"off"}, []string{"off"}},
		{"{% if x == nil or y == empty %}{% endif %}", []string{"x", "y"}, []string{"x", "y"}},
	} {
		t.Run(tc.text, func(t *testing.T) {
			var names, tests []string
			if err := vars(tc.text, func(name string, cond bool) {
				names = append(names, name)
				if cond {
					tests = append(tests, name)
				}
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names, tc.names) || !slices.Equal(tests, tc.tests) {
				t.Errorf("names %q (tested %q), want %q (tested %q)", names, tests, tc.names, tc.tests)
			}
		})
	}
	if err := vars("{% if %}", func(string, bool) {}); err == nil {
		t.Error("a template that does not parse: no error")
	}
}
