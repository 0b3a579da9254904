package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ParseRef splits "NAME[@VERSION]".
func ParseRef(ref string) (name, version string) {
	name, version, _ = strings.Cut(ref, "@")
	return name, version
}

// Dir resolves agent references in a directory laid out as
// {agent_name}/{version}.json, the RAGstream layout. It is stateless: each
// call reads the files anew.
type Dir struct {
	// Path is the directory.
	Path string
}

// Versions returns the versions of agent name, oldest first (ordered
// naturally: v2 before v10, 1.9 before 1.10).
func (d Dir) Versions(name string) ([]string, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("%w %q: bad agent name", ErrUnknownAgent, name)
	}
	entries, err := os.ReadDir(filepath.Join(d.Path, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w %q: no directory %s", ErrUnknownAgent, name, filepath.Join(d.Path, name))
	}
	if err != nil {
		return nil, err
	}
	var vs []string
	for _, e := range entries {
		if v, ok := strings.CutSuffix(e.Name(), ".json"); ok && !e.IsDir() && ValidVersion(v) {
			vs = append(vs, v)
		}
	}
	slices.SortFunc(vs, CompareVersions)
	return vs, nil
}

// Names returns the agents of the directory: its subdirectories with a
// valid agent name, sorted.
func (d Dir) Names() ([]string, error) {
	entries, err := os.ReadDir(d.Path)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && ValidName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Load reads the spec that ref ("NAME" or "NAME@VERSION") names; without a
// version, the latest. A file whose agent_name or version differs from its
// path is refused.
func (d Dir) Load(ref string) (*Spec, string, error) {
	name, version := ParseRef(ref)
	if version == "" {
		vs, err := d.Versions(name)
		if err != nil {
			return nil, "", err
		}
		if len(vs) == 0 {
			return nil, "", fmt.Errorf("%w %q: no versions in %s", ErrUnknownAgent, name, filepath.Join(d.Path, name))
		}
		version = vs[len(vs)-1]
	}
	if !ValidName(name) || !ValidVersion(version) {
		return nil, "", fmt.Errorf("%w %q: bad reference (want NAME or NAME@VERSION)", ErrUnknownAgent, ref)
	}
	path := filepath.Join(d.Path, name, version+".json")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		vs, _ := d.Versions(name)
		return nil, "", fmt.Errorf("%w %s@%s: no file %s (versions: %s)", ErrUnknownAgent, name, version, path, strings.Join(vs, ", "))
	}
	s, err := Load(path)
	if err != nil {
		return nil, "", err
	}
	if s.AgentName != name || s.Version != version {
		return nil, "", &Error{Source: path, Problems: []string{fmt.Sprintf(
			"the file says agent_name %q version %q but its path says %q version %q", s.AgentName, s.Version, name, version)}}
	}
	return s, path, nil
}

// CompareVersions orders versions naturally: runs of digits compare as
// numbers, so v2 < v10 and 1.9.0 < 1.10.0.
func CompareVersions(a, b string) int {
	for a != "" && b != "" {
		ra, restA := versionRun(a)
		rb, restB := versionRun(b)
		if c := compareRun(ra, rb); c != 0 {
			return c
		}
		a, b = restA, restB
	}
	return len(a) - len(b)
}

func versionRun(s string) (run, rest string) {
	digit := s[0] >= '0' && s[0] <= '9'
	i := 1
	for i < len(s) && (s[i] >= '0' && s[i] <= '9') == digit {
		i++
	}
	return s[:i], s[i:]
}

func compareRun(a, b string) int {
	ad, bd := a[0] >= '0' && a[0] <= '9', b[0] >= '0' && b[0] <= '9'
	if ad && bd {
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(a) != len(b) {
			return len(a) - len(b)
		}
	}
	return strings.Compare(a, b)
}
