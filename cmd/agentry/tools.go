package main

import (
	"github.com/agentry/agentry/tool"
	"github.com/agentry/agentry/tool/httptool"
	"github.com/agentry/agentry/tool/kv"
)

// builtinTools returns the tools every spec run by the CLI can name:
// kv_get, kv_set, kv_delete, kv_list over a store that lives as long as the
// process, http_get and http_request.
func builtinTools(allowPrivate bool) *tool.Registry {
	o := httptool.Options{AllowPrivate: allowPrivate}
	tools := append(kv.Tools(kv.NewStore()), httptool.New(o), httptool.NewRequest(o))
	tools = append(tools, extraTools(o)...)
	r, err := tool.NewRegistry(tools...)
	if err != nil {
		panic(err) // the built-in names are fixed and distinct
	}
	return r
}
