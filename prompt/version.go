package prompt

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A version is a string, as an agent's is: "v1", "3", "1.2.0". Versions
// that parse as numbers ("3", "v3") or semantic versions ("1.2.0",
// "v1.2.0-rc.1") are ordered as such; others ("draft") come before
// them, in lexical order.

var (
	versionChars = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)
	numbered     = regexp.MustCompile(`^[vV]?(\d+(?:\.\d+)*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$`)
	counted      = regexp.MustCompile(`^([vV]?)(\d+)$`)
)

// checkVersion refuses a version that cannot name a file or follow an @.
func checkVersion(v string) error {
	if !versionChars.MatchString(v) {
		return fmt.Errorf("%w: version %q: use 1 to 64 letters, digits, '.', '_', '-' or '+', starting with a letter or digit", ErrInvalid, v)
	}
	return nil
}

// CompareVersions orders two versions: numerically or as semantic
// versions where both parse so (1 < 2 < 10, 1.2.0 < 1.10.0, 2.0.0-rc.1
// < 2.0.0, and v3 is 3), a version that does not parse before one that
// does, and otherwise lexically. It returns -1, 0 or +1; only equal
// strings compare 0.
func CompareVersions(a, b string) int {
	ma, mb := numbered.FindStringSubmatch(a), numbered.FindStringSubmatch(b)
	switch {
	case ma == nil && mb == nil:
		return cmp.Compare(a, b)
	case ma == nil:
		return -1
	case mb == nil:
		return 1
	}
	pa, pb := strings.Split(ma[1], "."), strings.Split(mb[1], ".")
	for i := range max(len(pa), len(pb)) {
		if c := cmp.Compare(part(pa, i), part(pb, i)); c != 0 {
			return c
		}
	}
	// A pre-release comes before its release.
	switch {
	case ma[2] != mb[2] && ma[2] == "":
		return 1
	case ma[2] != mb[2] && mb[2] == "":
		return -1
	}
	return cmp.Or(cmp.Compare(ma[2], mb[2]), cmp.Compare(a, b))
}

func part(parts []string, i int) uint64 {
	if i >= len(parts) {
		return 0
	}
	n, _ := strconv.ParseUint(parts[i], 10, 64)
	return n
}

// latest returns the greatest of versions, or "".
func latest(versions []string) string {
	if len(versions) == 0 {
		return ""
	}
	return slices.MaxFunc(versions, CompareVersions)
}

// alternate is the other spelling of a counted version, "v3" for "3"
// and "3" for "v3": a reference finds a template stored under the other
// when none is stored under the one it names (a store written before
// versions were strings holds "3" where a spec may say "v3").
func alternate(v string) string {
	m := counted.FindStringSubmatch(v)
	switch {
	case m == nil:
		return ""
	case m[1] == "":
		return "v" + m[2]
	default:
		return m[2]
	}
}

// NextVersion is the version Put gives a template put without one,
// after the versions its id has: one more than the greatest counted
// version ("3" or "v3": "4" or "v4", in the same form), "1" for the
// first. Where the id has versions but no counted one ("1.2.0"), there
// is no next to count to: the template must say its version.
func NextVersion(id string, versions []string) (string, error) {
	found, prefix, n := false, "", uint64(0)
	for _, v := range versions {
		m := counted.FindStringSubmatch(v)
		if m == nil {
			continue
		}
		if k, _ := strconv.ParseUint(m[2], 10, 64); !found || k > n || k == n && m[1] != "" {
			found, prefix, n = true, m[1], k
		}
	}
	if !found && len(versions) > 0 {
		return "", fmt.Errorf("%w: %s: its versions (latest %s) are not counted (1, 2, … or v1, v2, …): give the version to put",
			ErrInvalid, id, latest(versions))
	}
	return prefix + strconv.FormatUint(n+1, 10), nil
}

// UnmarshalJSON reads a template. A version written as a whole number
// (as template files and stores had it before versions were strings) is
// read as its digits.
func (t *Template) UnmarshalJSON(data []byte) error {
	type plain Template
	var aux struct {
		*plain
		Version json.RawMessage `json:"version"`
	}
	aux.plain = (*plain)(t)
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	t.Version = ""
	switch v := aux.Version; {
	case len(v) == 0 || string(v) == "null":
	case v[0] == '"':
		return json.Unmarshal(v, &t.Version)
	default:
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return fmt.Errorf("field \"version\": expected a string such as \"v1\" or \"1.2.0\", got %s", v)
		}
		t.Version = strconv.FormatUint(n, 10)
	}
	return nil
}
