package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/agentry/agentry/internal/httphdr"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// Importing the package registers the source of "a2a:URL" tools entries:
// each a remote agent, its card read when the agent is built, with the
// headers of the spec's a2a_agents entry for its URL.
func init() { tool.RegisterSource("a2a", source{}) }

type source struct{}

// Open opens the remote agent of each entry; one that fails is an error
// naming the entry.
func (source) Open(ctx context.Context, req tool.SourceRequest) ([]tool.Set, error) {
	var sp spec.Spec
	if err := json.Unmarshal(req.Spec, &sp); err != nil {
		return nil, fmt.Errorf("a2a: the spec: %w", err)
	}
	var sets []tool.Set
	var errs []error
	for i, entry := range req.Entries {
		url := strings.TrimPrefix(entry, "a2a:")
		client, err := headersClient(sp.A2AAgent(url))
		var remote *Tool
		if err == nil {
			remote, err = Open(ctx, url, client)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("tools[%d] %q: %w", req.Index[i], entry, err))
			continue
		}
		sets = append(sets, one{remote})
	}
	return sets, errors.Join(errs...)
}

// headersClient is the HTTP client of an "a2a:URL" entry: with the
// headers of its a2a_agents entry, their ${env:NAME} filled in; nil for
// none.
func headersClient(cfg *spec.A2AAgent) (*http.Client, error) {
	if cfg == nil || len(cfg.Headers) == 0 {
		return nil, nil
	}
	h := http.Header{}
	for k, v := range cfg.Headers {
		val, err := spec.ExpandEnv(v, os.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("a2a_agents %s: headers.%s: %w", cfg.URL, k, err)
		}
		h.Set(k, val)
	}
	return &http.Client{Transport: &httphdr.Transport{Header: h}}, nil
}

// one is a remote agent as a set of one tool, which does not change.
type one struct{ t *Tool }

func (o one) Name() string                               { return o.t.url }
func (o one) Tools(context.Context) ([]tool.Tool, error) { return []tool.Tool{o.t}, nil }
func (o one) Changes() uint64                            { return 0 }
func (o one) Close() error                               { return o.t.Close() }
