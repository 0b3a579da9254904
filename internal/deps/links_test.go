package deps

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocLinks: docs/ links nothing outside the repository (the docs
// stand alone); every other link of it, the README and the changelog
// reaches a file of the repository, and a #section of a Markdown file
// one of its headings, so a link does not rot when a heading is renamed.
func TestDocLinks(t *testing.T) {
	root := "../.."
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, name := range []string{"README.md", "CHANGELOG.md", "SECURITY.md"} {
		pages = append(pages, filepath.Join(root, name))
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(outsideCode(string(data)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				if filepath.Base(filepath.Dir(page)) == "docs" {
					t.Errorf("%s: %s: the docs link nothing outside the repository", page, target)
				}
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			rel, err := filepath.Rel(root, path)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s: %s leaves the repository", page, target)
				continue
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: %s: no such file", page, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !hasHeading(t, path, anchor) {
				t.Errorf("%s: %s: %s has no heading #%s", page, target, rel, anchor)
			}
		}
	}
}

var fenced = regexp.MustCompile("(?ms)^```.*?^```")

// outsideCode is md without its fenced blocks, whose text is not links.
func outsideCode(md string) string { return fenced.ReplaceAllString(md, "") }

// hasHeading reports whether the Markdown file has a heading whose
// anchor (as GitHub makes them) is anchor, or an <a id> of that name.
func hasHeading(t *testing.T, path, anchor string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `<a id="`+anchor+`">`) {
		return true
	}
	for _, line := range strings.Split(outsideCode(string(data)), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok && slug(strings.TrimLeft(h, "#")) == anchor {
			return true
		}
	}
	return false
}

// slug is GitHub's anchor of a heading: lower case, spaces to hyphens,
// everything but letters, digits, hyphens and underscores dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
