//go:build unix && !linux

package shell

import "errors"

// sandboxable says why a run cannot be confined here: Landlock is
// Linux's.
func sandboxable(bool) string { return "Landlock, which confines the programs, is Linux's" }

func sandboxed(string, []string, string, bool) (string, []string, string, error) {
	return "", nil, "", errors.New("no sandbox on this system")
}
