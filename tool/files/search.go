package files

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/agentry/agentry/tool"
)

type searchArgs struct {
	Pattern    string `json:"pattern" jsonschema:"A regular expression (RE2 syntax) to find in the files' lines."`
	Path       string `json:"path,omitempty" jsonschema:"A directory or file under the working directory to search (default: all of it)."`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"At most this many matching lines (default 100, at most 1000)."`
}

// Match is one matching line.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// Matches is what file_search returns.
type Matches struct {
	Pattern   string  `json:"pattern"`
	Matches   []Match `json:"matches"`
	Truncated bool    `json:"truncated,omitempty"`
	// Skipped counts the files not searched: not text, or over the size
	// cap.
	Skipped int `json:"skipped,omitempty"`
}

// maxLine is how much of a matching line is returned.
const maxLine = 400

// search finds the lines that match a pattern in the text files under a
// path of the root, as grep -rn would, without a shell: the walk stays in
// the root (a symbolic link is not followed out of it), binary and
// oversized files are skipped, and the results are capped.
func (c *conn) search(ctx context.Context, a searchArgs) (*Matches, error) {
	if a.Pattern == "" {
		return nil, tool.NewErrorDetails("invalid_arguments", "pattern is empty: give a regular expression (RE2) to find", true)
	}
	re, err := regexp.Compile(a.Pattern)
	if err != nil {
		return nil, tool.NewErrorDetails("invalid_arguments", fmt.Sprintf("pattern %q is not a regular expression (RE2): %v", a.Pattern, err), true)
	}
	start := "."
	if a.Path != "" && a.Path != "." {
		if start, err = clean(a.Path); err != nil {
			return nil, err
		}
	}
	limit := a.MaxResults
	switch {
	case limit <= 0:
		limit = 100
	case limit > 1000:
		limit = 1000 // the most a call returns
	}
	root, err := c.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fsys := root.FS()
	out := &Matches{Pattern: a.Pattern, Matches: []Match{}}
	errFull := errors.New("full")
	err = fs.WalkDir(fsys, start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start {
				return err
			}
			return nil // an entry that cannot be read is passed over
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() || !d.Type().IsRegular() { // a symbolic link is not followed
			return nil
		}
		if info, err := d.Info(); err != nil || info.Size() > c.o.MaxBytes {
			out.Skipped++
			return nil
		}
		full, err := c.searchFile(fsys, p, re, out, limit)
		if full {
			return errFull
		}
		return err
	})
	switch {
	case errors.Is(err, errFull):
		out.Truncated = true
	case err != nil:
		return nil, failure(a.Path, err)
	}
	return out, nil
}

// searchFile adds a file's matching lines to out; full says the results
// reached limit.
func (c *conn) searchFile(fsys fs.FS, p string, re *regexp.Regexp, out *Matches, limit int) (full bool, err error) {
	f, err := fsys.Open(p)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, int(min(c.o.MaxBytes, 1<<20)))
	var found []Match
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if !utf8.Valid(line) || strings.ContainsRune(string(line), 0) {
			out.Skipped++ // not text: none of its lines count
			return false, nil
		}
		if re.Match(line) {
			text := string(line)
			if len(text) > maxLine {
				text = strings.ToValidUTF8(text[:maxLine], "") + "…"
			}
			found = append(found, Match{Path: path.Clean(p), Line: n, Text: text})
		}
	}
	if sc.Err() != nil {
		out.Skipped++ // a line over the cap: the file is not searched
		return false, nil
	}
	for _, m := range found {
		if len(out.Matches) == limit {
			return true, nil
		}
		out.Matches = append(out.Matches, m)
	}
	return false, nil
}
