package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LockFormat is the format tag of a lock file.
const LockFormat = "agentry.lock/v1"

// LockFile is the name of the lock file in an agents directory.
const LockFile = "agentry.lock"

// Lock records the output-schema hash of each agent version, so that a
// schema edited without a new version is caught (RAGstream 7.2).
type Lock struct {
	Format string `json:"format"`
	// Agents maps agent name to version to schema hash.
	Agents map[string]map[string]string `json:"agents"`
}

// SchemaHash returns "sha256:" and the hash of the spec's output schema in
// canonical JSON (keys sorted, no spaces), so formatting does not count.
func SchemaHash(s *Spec) string {
	var v any
	if len(s.OutputSchema) > 0 {
		_ = json.Unmarshal(s.OutputSchema, &v)
	}
	canon, _ := json.Marshal(v)
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ReadLock reads a lock file; a missing file is an empty lock.
func ReadLock(path string) (*Lock, error) {
	l := &Lock{Format: LockFormat, Agents: map[string]map[string]string{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, l); err != nil {
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	if l.Format != LockFormat {
		return nil, fmt.Errorf("lock file %s: format %q, want %q", path, l.Format, LockFormat)
	}
	if l.Agents == nil {
		l.Agents = map[string]map[string]string{}
	}
	return l, nil
}

// Check reports whether s still has the schema the lock recorded for its
// version. A version the lock does not know passes.
func (l *Lock) Check(s *Spec) error {
	want, ok := l.Agents[s.AgentName][s.Version]
	if !ok || want == SchemaHash(s) {
		return nil
	}
	return fmt.Errorf("agent %s version %s: %w (locked %s); keep the old file and give the new schema a new version",
		s.AgentName, s.Version, ErrSchemaChanged, want[:min(len(want), 19)])
}

// Add records s's schema hash. A version already locked with another
// schema is refused.
func (l *Lock) Add(s *Spec) error {
	if err := l.Check(s); err != nil {
		return err
	}
	if l.Agents[s.AgentName] == nil {
		l.Agents[s.AgentName] = map[string]string{}
	}
	l.Agents[s.AgentName][s.Version] = SchemaHash(s)
	return nil
}

// CheckLock checks s against the lock file of the directory, when there is
// one: a version whose output schema changed in place is refused.
func (d Dir) CheckLock(s *Spec) error {
	l, err := ReadLock(filepath.Join(d.Path, LockFile))
	if err != nil {
		return err
	}
	return l.Check(s)
}

// Write saves the lock.
func (l *Lock) Write(path string) error {
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
