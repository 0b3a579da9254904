package openai

import (
	"context"
	"errors"
	"strings"

	sdk "github.com/openai/openai-go/v3"

	"github.com/agentry/agentry/llm"
)

// apiError maps an SDK error to an *llm.APIError with the vendor's own
// message, never the request (which holds the key).
func (p *Provider) apiError(ctx context.Context, model string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var oe *sdk.Error
	if errors.As(err, &oe) {
		e := &llm.APIError{Kind: llm.KindForStatus(oe.StatusCode), Provider: p.name, Model: model,
			Status: oe.StatusCode, Message: oe.Message}
		if e.Message == "" {
			e.Message = strings.TrimSpace(oe.RawJSON())
		}
		if oe.Response != nil {
			e.RetryAfter = llm.ParseRetryAfter(oe.Response.Header)
		}
		switch code := oe.Code; {
		case code == "context_length_exceeded" || code == "string_above_max_length":
			e.Kind = llm.KindContextTooLong
		case code == "content_filter" || code == "content_policy_violation":
			e.Kind = llm.KindContentFiltered
		case code == "insufficient_quota":
			e.Kind = llm.KindAuth // retrying does not refill a quota
		case code == "model_not_found":
			e.Kind = llm.KindNotFound
		}
		if oe.Code != "" && !strings.Contains(e.Message, oe.Code) {
			e.Message += " (" + oe.Code + ")"
		}
		return e
	}
	return llm.TransportError(p.name, model, err)
}

// transportMessage describes a network failure without the URL, which may
// carry credentials for some servers.
