package main

import (
	"github.com/agentry/agentry/tool"
	"github.com/agentry/agentry/tool/httptool"
	"github.com/agentry/agentry/tool/kv"
)

// builtinTools returns the tools every spec run by the CLI can name:
// kv_get, kv_set, kv_delete, kv_list over a store that lives as long as the
// process, and http_get.
func builtinTools(allowPrivate bool) *tool.Registry {
	tools := append(kv.Tools(kv.NewStore()), httptool.New(httptool.Options{AllowPrivate: allowPrivate}))
	r, err := tool.NewRegistry(tools...)
	if err != nil {
		panic(err) // the built-in names are fixed and distinct
	}
	return r
}
