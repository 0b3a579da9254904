package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCompareVersions(t *testing.T) {
	// Each is before the next.
	ordered := []string{"alpha", "draft", "1", "v2", "3", "v10", "10.0.1", "11.0.0-rc.1", "11.0.0-rc.2", "11.0.0", "v11.0.1"}
	for i := range ordered {
		for j := range ordered {
			want := map[bool]int{true: -1, false: 1}[i < j]
			if i == j {
				want = 0
			}
			if got := CompareVersions(ordered[i], ordered[j]); got != want {
				t.Errorf("CompareVersions(%q, %q) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	// Equal as numbers, still ordered, so that sorting is stable.
	if CompareVersions("1", "v1") == 0 || CompareVersions("1", "v1") != -CompareVersions("v1", "1") {
		t.Error("1 and v1 compare equal or not antisymmetrically")
	}
}

func TestNextVersion(t *testing.T) {
	for _, tc := range []struct {
		have []string
		want string
		err  string
	}{
		{nil, "1", ""},
		{[]string{"1", "2"}, "3", ""},
		{[]string{"v1", "v9"}, "v10", ""},
		{[]string{"1", "v2"}, "v3", ""},
		{[]string{"v3", "2", "draft"}, "v4", ""},
		{[]string{"1.2.0"}, "", "give the version to put"},
	} {
		got, err := NextVersion("greet", tc.have)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("NextVersion(%v) = %q, %v; want %q, %q", tc.have, got, err, tc.want, tc.err)
		}
	}
}

// Files are found by the version as written (prompts/hello/v1.json is
// hello@v1), ordered as versions (v10 after v2), with the other spelling
// of a counted version as a fallback.
func TestDirVersionsAsWritten(t *testing.T) {
	ctx := context.Background()
	d := Dir("testdata/prompts")
	for _, tc := range []struct{ id, version, want string }{
		{"hello", "v1", "v1"},
		{"hello", "", "v10"},
		{"hello", "2", "v2"},  // the other spelling
		{"greet", "v1", "1"},  // and back
		{"sem", "", "1.10.0"}, // a release after its pre-release, 10 after 2
		{"sem", "1.10.0-rc.1", "1.10.0-rc.1"},
	} {
		got, err := d.Get(ctx, tc.id, tc.version)
		if err != nil || got.Version != tc.want {
			t.Errorf("Get(%s, %q) = %q, %v; want version %q", tc.id, tc.version, got.Version, err, tc.want)
		}
	}
	if _, err := d.Get(ctx, "hello", "v3"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "hello@v3") {
		t.Errorf("a version not there: %v", err)
	}
	all, _ := d.List(ctx, Filter{ID: "hello", AllVersions: true})
	var vs []string
	for _, t := range all {
		vs = append(vs, t.Version)
	}
	if !slices.Equal(vs, []string{"v1", "v2", "v10"}) {
		t.Errorf("List = %v, want v1 v2 v10", vs)
	}
	if r, err := Fixed(all...).Get(ctx, "hello", "v2"); err != nil || r.Ref() != "hello@v2" {
		t.Errorf("Fixed.Get(hello@v2) = %v, %v", r.Ref(), err)
	}
}

// A version written as a whole number, as files and stores had it, is
// read as its digits; other numbers are refused naming the field.
func TestTemplateVersionJSON(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{`{"id": "a", "version": "v1", "text": "x"}`, "v1", ""},
		{`{"id": "a", "version": 3, "text": "x"}`, "3", ""},
		{`{"id": "a", "text": "x"}`, "", ""},
		{`{"id": "a", "version": 1.5, "text": "x"}`, "", `"version"`},
	} {
		var tpl Template
		err := json.Unmarshal([]byte(tc.in), &tpl)
		if tpl.Version != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %q, %v", tc.in, tpl.Version, err)
		}
	}
	if probs := Validate(Template{ID: "a", Version: "../x", Text: "x"}); len(probs) != 1 || !strings.Contains(probs[0], "version") {
		t.Errorf("Validate of a version that leaves its directory: %v", probs)
	}
}
