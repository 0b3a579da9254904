package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentry/agentry/internal/strictjson"
)

// Template is a versioned, immutable prompt of the prompt store. A new text is a new version; a version never changes.
type Template struct {
	ID string `json:"id"`
	// Name is what people call the template ("Support triage"); the id is
	// what specs name it by.
	Name string `json:"name,omitempty"`
	// Version is a string, as an agent's is ("v1", "3", "1.2.0"): the
	// one Put is given, or the next counted one (NextVersion). Versions
	// are ordered by CompareVersions.
	Version string `json:"version"`
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
func (t *Template) Ref() string { return t.ID + "@" + t.Version }

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
	// Get returns a version of a template, found by the version as
	// written ("v3", or "3" where only that exists); version "" is the
	// latest.
	Get(ctx context.Context, id string, version string) (Template, error)
	// Put validates t and stores it under t.Version, which must be new,
	// or, when t.Version is "", as the next version of t.ID
	// (NextVersion); it returns it (Version and CreatedAt set).
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

// ParseRef splits "id@version" ("id" alone: version "", the latest).
func ParseRef(ref string) (id string, version string, err error) {
	id, v, ok := strings.Cut(ref, "@")
	if err := checkID(id); err != nil {
		return "", "", err
	}
	if !ok {
		return id, "", nil
	}
	if err := checkVersion(v); err != nil {
		return "", "", fmt.Errorf("%w (in %q)", err, ref)
	}
	return id, v, nil
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

func (d Dir) path(id, version string) string {
	return filepath.Join(string(d), id, version+".json")
}

// versions are the versions of id's files, in order.
func (d Dir) versions(id string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(string(d), id))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if v, ok := strings.CutSuffix(e.Name(), ".json"); ok && !e.IsDir() && checkVersion(v) == nil {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, CompareVersions)
	return out, nil
}

// Get reads a template file: {id}/{version}.json, the name as given.
func (d Dir) Get(_ context.Context, id string, version string) (Template, error) {
	if err := checkID(id); err != nil {
		return Template{}, err
	}
	vs, err := d.versions(id)
	if err != nil {
		return Template{}, err
	}
	found, err := Pick(id, version, vs)
	if err != nil {
		return Template{}, fmt.Errorf("%w (in %s)", err, filepath.Join(string(d), id))
	}
	path := d.path(id, found)
	data, err := os.ReadFile(path)
	if err != nil {
		return Template{}, err
	}
	var t Template
	if err := strictjson.Decode(data, &t); err != nil {
		return Template{}, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	if t.ID != id || t.Version != found {
		return Template{}, fmt.Errorf("%w: %s holds %s; its path says %s@%s", ErrInvalid, path, t.Ref(), id, found)
	}
	if probs := Validate(t); len(probs) > 0 {
		return Template{}, fmt.Errorf("%w: %s: %s", ErrInvalid, path, strings.Join(probs, "; "))
	}
	return t, nil
}

// Pick is the version of have (the versions id has) that a reference
// to id@version names: the latest for "", else version itself, else its
// other spelling ("3" for "v3" and back); ErrNotFound when none is
// there. Stores find templates with it.
func Pick(id, version string, have []string) (string, error) {
	switch {
	case version == "" && len(have) > 0:
		return latest(have), nil
	case version == "":
		return "", fmt.Errorf("%w: %s (no versions)", ErrNotFound, id)
	case slices.Contains(have, version):
		return version, nil
	case alternate(version) != "" && slices.Contains(have, alternate(version)):
		return alternate(version), nil
	}
	return "", fmt.Errorf("%w: %s@%s", ErrNotFound, id, version)
}

// Put refuses: files are written by hand and versioned with the code.
func (d Dir) Put(context.Context, Template) (Template, error) {
	return Template{}, fmt.Errorf("%w: %s is a directory of files; add prompts/{id}/{version}.json, or put it into a run store", ErrReadOnly, string(d))
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
			vs = []string{latest(vs)}
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
