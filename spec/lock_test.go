package spec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestLock: a lock records each version's output-schema hash, whatever
// the schema's formatting; a version edited in place is refused, a new
// version passes; the file round-trips, and a foreign one is refused.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, LockFile)
	a := &Spec{AgentName: "a", Version: "1", OutputSchema: json.RawMessage(`{"type": "object", "properties": {"x": {"type": "string"}}}`)}
	spaced := &Spec{AgentName: "a", Version: "1", OutputSchema: json.RawMessage(`{"properties":{"x":{"type":"string"}},   "type":"object"}`)}
	if SchemaHash(a) != SchemaHash(spaced) || !strings.HasPrefix(SchemaHash(a), "sha256:") {
		t.Errorf("the hash depends on formatting: %s, %s", SchemaHash(a), SchemaHash(spaced))
	}
	l, err := ReadLock(path) // none yet: empty
	if err != nil || len(l.Agents) != 0 {
		t.Fatalf("a missing lock: %+v, %v", l, err)
	}
	if err := l.Add(a); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(path); err != nil {
		t.Fatal(err)
	}
	edited := &Spec{AgentName: "a", Version: "1", OutputSchema: json.RawMessage(`{"type": "object"}`)}
	for _, tc := range []struct {
		name string
		s    *Spec
		ok   bool
	}{
		{"the locked schema", spaced, true},
		{"edited in place", edited, false},
		{"a new version", &Spec{AgentName: "a", Version: "2", OutputSchema: json.RawMessage(`{"type": "object"}`)}, true},
		{"another agent", &Spec{AgentName: "b", Version: "1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Dir{Path: dir}.CheckLock(tc.s)
			if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrSchemaChanged) {
				t.Errorf("CheckLock = %v", err)
			}
		})
	}
	l2, _ := ReadLock(path)
	if err := l2.Add(edited); !errors.Is(err, ErrSchemaChanged) {
		t.Errorf("Add of a version edited in place = %v", err)
	}
	for _, bad := range []string{`{"format": "other/v9", "agents": {}}`, `not json`} {
		os.WriteFile(path, []byte(bad), 0o644)
		if _, err := ReadLock(path); err == nil {
			t.Errorf("ReadLock(%s): no error", bad)
		}
	}
}

// TestDirNames: an agents directory's agents are its folders named as
// agents, sorted; files and odd names are not agents.
func TestDirNames(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"writer", "critic", "not an agent"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "agentry.lock"), []byte("{}"), 0o644)
	names, err := Dir{Path: dir}.Names()
	if err != nil || !reflect.DeepEqual(names, []string{"critic", "writer"}) {
		t.Errorf("Names = %v, %v", names, err)
	}
	if _, err := (Dir{Path: filepath.Join(dir, "missing")}).Names(); err == nil {
		t.Error("the names of a missing directory: no error")
	}
}
