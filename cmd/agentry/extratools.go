//go:build !agentry_testtools

package main

import (
	"github.com/agentry/agentry/tool"
	"github.com/agentry/agentry/tool/httptool"
)

// extraTools are none in a release build; the crash tests build with the
// agentry_testtools tag, which adds a tool of theirs (testtools.go).
func extraTools(httptool.Options) []tool.Tool { return nil }
