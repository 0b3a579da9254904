package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/agentry/agentry"
	"github.com/spf13/cobra"
)

// version describes the binary: agentry's version (agentry.Version),
// then from its build information the VCS revision when known and the Go
// release that built it.
func version() string {
	s := "agentry " + agentry.Version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return s
	}
	var rev, dirty string
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			if kv.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		s += " " + rev + dirty
	}
	return s + " " + bi.GoVersion
}

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of agentry and of the Go release that built it",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(stdout, version())
			return err
		},
	}
}
