package files

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSearch: file_search finds matching lines under the root, as grep
// -rn would, and stays in the root: a symbolic link out of it is not
// followed (its target's words are not found), a path with ".." or an
// absolute one is refused, a file over the cap or not text is skipped.
func TestSearch(t *testing.T) {
	root, tools := setup(t, false)
	os.WriteFile(filepath.Join(root, "notes", "b.txt"), []byte("first\nthe hello line\nlast hello\n"), 0o600)
	os.WriteFile(filepath.Join(root, "bin.dat"), []byte("hello\x00\x01"), 0o600)
	os.Symlink("/etc", filepath.Join(root, "etc-link"))
	search := tools["file_search"]
	if search == nil {
		t.Fatal("no file_search")
	}
	for _, tc := range []struct {
		name, args string
		want       []string // path:line of each match
		errType    string
		truncated  bool
	}{
		{"every match, in order; no link followed", `{"pattern": "hello"}`, []string{"notes/a.txt:1", "notes/b.txt:2", "notes/b.txt:3"}, "", false},
		{"under a path", `{"pattern": "hello", "path": "notes"}`, []string{"notes/a.txt:1", "notes/b.txt:2", "notes/b.txt:3"}, "", false},
		{"capped", `{"pattern": "hello", "path": "notes", "max_results": 2}`, []string{"notes/a.txt:1", "notes/b.txt:2"}, "", true},
		{"a regexp", `{"pattern": "^last"}`, []string{"notes/b.txt:3"}, "", false},
		{"what a link out holds", `{"pattern": "outside"}`, nil, "", false},
		{"what /etc holds, through a link", `{"pattern": "root"}`, nil, "", false},
		{"out by ..", `{"pattern": "x", "path": "../"}`, nil, "invalid_arguments", false},
		{"out by an absolute path", `{"pattern": "x", "path": "/etc"}`, nil, "invalid_arguments", false},
		{"not a regexp", `{"pattern": "("}`, nil, "invalid_arguments", false},
		{"no pattern", `{"pattern": ""}`, nil, "pattern is empty", false},
		{"a path that is not there", `{"pattern": "x", "path": "nope"}`, nil, "not_found", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := call(search, tc.args)
			if tc.errType != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errType) && !strings.Contains(out, tc.errType) {
					t.Errorf("want %s, got %s, %v", tc.errType, out, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var m Matches
			json.Unmarshal([]byte(out), &m)
			var got []string
			for _, x := range m.Matches {
				got = append(got, x.Path+":"+itoa(x.Line))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") || m.Truncated != tc.truncated {
				t.Errorf("matches %v (truncated %v), want %v (%v)", got, m.Truncated, tc.want, tc.truncated)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
