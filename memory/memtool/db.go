package memtool

import (
	"context"
	"encoding/json"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/tool"
)

type writeArgs struct {
	Collection string         `json:"collection"`
	Key        string         `json:"key"`
	Value      map[string]any `json:"value" jsonschema:"A JSON object."`
}

type docArgs struct {
	Collection string `json:"collection"`
	Key        string `json:"key"`
}

type queryArgs struct {
	Collection string          `json:"collection"`
	Where      []memory.Filter `json:"where,omitempty" jsonschema:"Filters, all of which must match: {field, op (= != < <= > >=), value}."`
	OrderBy    string          `json:"order_by,omitempty"`
	Desc       bool            `json:"desc,omitempty"`
	Limit      int             `json:"limit,omitempty"`
}

type docSearchArgs struct {
	Collection string `json:"collection"`
	Text       string `json:"text"`
	TopK       int    `json:"top_k,omitempty"`
}

// inCollection returns the call's scope once it may reach collection.
func inCollection(ctx context.Context, collection string) (*Scope, error) {
	s, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	return s, s.collection(collection)
}

func dbWrite(ctx context.Context, in writeArgs) (map[string]any, error) {
	s, err := inCollection(ctx, in.Collection)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(in.Value)
	if err != nil {
		return nil, tool.NewErrorDetails("invalid_arguments", "value: "+err.Error(), true)
	}
	text, err := s.filter(ctx, "db:"+in.Collection+"/"+in.Key, string(data), true)
	if err != nil {
		return nil, failed(err)
	}
	var value map[string]any
	if err := json.Unmarshal([]byte(text), &value); err != nil {
		return nil, tool.NewErrorDetails("invalid_arguments", "value: "+err.Error(), true)
	}
	d, err := s.Backend.DB().Write(ctx, memory.Doc{Collection: in.Collection, Key: in.Key, Value: value,
		RunID: s.RunID, Agent: s.Agent, UserID: s.UserID})
	if err != nil {
		return nil, failed(err)
	}
	if s.Wrote != nil {
		s.Wrote(d)
	}
	return map[string]any{"collection": d.Collection, "key": d.Key}, nil
}

func dbRead(ctx context.Context, in docArgs) (map[string]any, error) {
	s, err := inCollection(ctx, in.Collection)
	if err != nil {
		return nil, err
	}
	d, err := s.Backend.DB().Read(ctx, in.Collection, in.Key)
	if err != nil {
		return nil, failed(err)
	}
	return d.Value, nil
}

func dbQuery(ctx context.Context, in queryArgs) ([]map[string]any, error) {
	s, err := inCollection(ctx, in.Collection)
	if err != nil {
		return nil, err
	}
	docs, err := s.Backend.DB().Query(ctx, in.Collection, memory.Query{Where: in.Where, OrderBy: in.OrderBy, Desc: in.Desc, Limit: min(max(in.Limit, 0), 100)})
	if err != nil {
		return nil, failed(err)
	}
	out := []map[string]any{}
	for _, d := range docs {
		out = append(out, map[string]any{"key": d.Key, "value": d.Value})
	}
	return out, nil
}

func dbSearch(ctx context.Context, in docSearchArgs) ([]map[string]any, error) {
	s, err := inCollection(ctx, in.Collection)
	if err != nil {
		return nil, err
	}
	hits, err := s.Backend.DB().Search(ctx, in.Collection, in.Text, min(max(in.TopK, 0), 50))
	if err != nil {
		return nil, failed(err)
	}
	out := []map[string]any{}
	for _, h := range hits {
		out = append(out, map[string]any{"key": h.Key, "value": h.Value, "score": h.Score})
	}
	return out, nil
}
