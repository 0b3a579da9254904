package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentry/agentry/internal/strictjson"
)

// Template is a versioned, immutable prompt of the prompt store
// (DESIGN.md 3.10). A new text is a new version; a version never changes.
type Template struct {
	ID string `json:"id"`
	// Version is 1 for the first, then each Put adds one.
	Version int    `json:"version"`
	Text    string `json:"text"`
	// Engine renders Text: fstring (${var}, the default), go
	// (text/template) or mustache.
	Engine Engine `json:"engine,omitempty"`
	// RequiredVars must each be given to Render, and appear in Text.
	RequiredVars []string `json:"required_vars,omitempty"`
	// Metadata is free, but for "tags" (a list of strings List filters
	// by) and "few_shot" (a list of {"input", "output"} examples).
	Metadata  map[string]any `json:"metadata,omitempty"`
	CreatedBy string         `json:"created_by,omitempty"`
	CreatedAt time.Time      `json:"created_at,omitzero"`
}

// Ref is how a spec names a template: "id@version", or "id" for the
// latest.
func (t *Template) Ref() string { return t.ID + "@" + strconv.Itoa(t.Version) }

// Example is a few-shot example of a template's metadata.
type Example struct {
	Input  string `json:"input"`
	Output string `json:"output"`
}

// Examples returns the few-shot examples of the template's metadata.
func (t *Template) Examples() ([]Example, error) {
	raw, ok := t.Metadata["few_shot"]
	if !ok {
		return nil, nil
	}
	data, _ := json.Marshal(raw)
	var out []Example
	if err := strictjson.Decode(data, &out); err != nil {
		return nil, fmt.Errorf("metadata.few_shot: want a list of {\"input\", \"output\"}: %v", err)
	}
	return out, nil
}

// Tags returns the tags of the template's metadata.
func (t *Template) Tags() []string {
	list, _ := t.Metadata["tags"].([]any)
	var out []string
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Filter selects templates in List: by ID (exact) or Tag; every version
// when AllVersions, else the latest of each.
type Filter struct {
	ID          string
	Tag         string
	AllVersions bool
}

// Matches reports whether t passes the filter (versions aside).
func (f Filter) Matches(t *Template) bool {
	return (f.ID == "" || t.ID == f.ID) && (f.Tag == "" || slices.Contains(t.Tags(), f.Tag))
}

// Store keeps templates.
type Store interface {
	// Get returns a version of a template; version 0 is the latest.
	Get(ctx context.Context, id string, version int) (Template, error)
	// Put validates t and stores it as the next version of t.ID, which
	// it returns (Version and CreatedAt set).
	Put(ctx context.Context, t Template) (Template, error)
	// List returns the templates f selects, by ID then version.
	List(ctx context.Context, f Filter) ([]Template, error)
}

// Errors of stores, matched with errors.Is.
var (
	ErrNotFound = errors.New("prompt: no such template")
	ErrReadOnly = errors.New("prompt: the store is read-only")
	ErrInvalid  = errors.New("prompt: invalid template")
)

// ParseRef splits "id@version" ("id" alone: version 0, the latest).
func ParseRef(ref string) (id string, version int, err error) {
	id, v, ok := strings.Cut(ref, "@")
	if err := checkID(id); err != nil {
		return "", 0, err
	}
	if !ok {
		return id, 0, nil
	}
	version, err = strconv.Atoi(strings.TrimPrefix(v, "v"))
	if err != nil || version < 1 {
		return "", 0, fmt.Errorf("%w: %q: the version after @ is a number from 1", ErrInvalid, ref)
	}
	return id, version, nil
}

func checkID(id string) error {
	if id == "" || len(id) > 128 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != "" || id[0] == '.' {
		return fmt.Errorf("%w: id %q: use 1 to 128 letters, digits, '_', '-' or '.'", ErrInvalid, id)
	}
	return nil
}

// Dir is a read-only store of files, prompts/{id}/{version}.json, each a
// Template in JSON (its id and version must match its path).
type Dir string

func (d Dir) path(id string, version int) string {
	return filepath.Join(string(d), id, strconv.Itoa(version)+".json")
}

func (d Dir) versions(id string) ([]int, error) {
	entries, err := os.ReadDir(filepath.Join(string(d), id))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		if v, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json")); err == nil && strings.HasSuffix(e.Name(), ".json") && v > 0 {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Get reads a template file.
func (d Dir) Get(_ context.Context, id string, version int) (Template, error) {
	if err := checkID(id); err != nil {
		return Template{}, err
	}
	if version == 0 {
		vs, err := d.versions(id)
		if err != nil {
			return Template{}, err
		}
		if len(vs) == 0 {
			return Template{}, fmt.Errorf("%w: %s (no versions in %s)", ErrNotFound, id, filepath.Join(string(d), id))
		}
		version = vs[len(vs)-1]
	}
	path := d.path(id, version)
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return Template{}, fmt.Errorf("%w: %s@%d (no file %s)", ErrNotFound, id, version, path)
	}
	if err != nil {
		return Template{}, err
	}
	var t Template
	if err := strictjson.Decode(data, &t); err != nil {
		return Template{}, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	if t.ID != id || t.Version != version {
		return Template{}, fmt.Errorf("%w: %s holds %s@%d; its path says %s@%d", ErrInvalid, path, t.ID, t.Version, id, version)
	}
	if probs := Validate(t); len(probs) > 0 {
		return Template{}, fmt.Errorf("%w: %s: %s", ErrInvalid, path, strings.Join(probs, "; "))
	}
	return t, nil
}

// Put refuses: files are written by hand and versioned with the code.
func (d Dir) Put(context.Context, Template) (Template, error) {
	return Template{}, fmt.Errorf("%w: %s is a directory of files; add prompts/{id}/{version}.json, or put into the store (--db)", ErrReadOnly, string(d))
}

// List reads every template file the filter selects.
func (d Dir) List(ctx context.Context, f Filter) ([]Template, error) {
	entries, err := os.ReadDir(string(d))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var out []Template
	for _, e := range entries {
		if !e.IsDir() || f.ID != "" && e.Name() != f.ID {
			continue
		}
		vs, err := d.versions(e.Name())
		if err != nil {
			return nil, err
		}
		if !f.AllVersions && len(vs) > 0 {
			vs = vs[len(vs)-1:]
		}
		for _, v := range vs {
			t, err := d.Get(ctx, e.Name(), v)
			if err != nil {
				return nil, err
			}
			if f.Matches(&t) {
				out = append(out, t)
			}
		}
	}
	return out, nil
}
