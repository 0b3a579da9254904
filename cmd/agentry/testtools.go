//go:build agentry_testtools

package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentry/agentry/tool"
	"github.com/agentry/agentry/tool/httptool"
)

type chargeArgs struct {
	URL    string `json:"url"`
	Amount int    `json:"amount"`
}

// extraTools adds charge to a test build of the binary: a non-idempotent
// tool that POSTs to a payment service which does not deduplicate, so
// sends no idempotency key and declares no deduplication. It is what the
// crash tests kill the binary in the middle of.
func extraTools(o httptool.Options) []tool.Tool {
	return []tool.Tool{tool.Must(tool.Func("charge", "Charge an amount at a payment service.",
		func(ctx context.Context, a chargeArgs) (map[string]any, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL, strings.NewReader(fmt.Sprint(a.Amount)))
			if err != nil {
				return nil, err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			return map[string]any{"status": resp.StatusCode}, nil
		}, tool.WithIdempotency(tool.NonIdempotent)))}
}
