// Package redis is the Redis memory backend, through
// github.com/redis/go-redis/v9: streams and document collections (the
// run store itself stays in SQLite or Postgres). Importing it registers
// "redis" with memory.Open, which takes redis://, rediss:// and unix://
// URLs; a "prefix" parameter (default "agentry:") keeps agentry's keys
// apart from others': redis://host:6379/0?prefix=app1:.
//
// A stream is a sorted set of entries by id, with a second sorted set of
// expiry times; appends run as one script, so retention is exact. Reads,
// searches and queries happen in the process over a stream's or a
// collection's members (the Debian server has no search module): state a
// retention for streams that are searched. Durability is the server's:
// run it with appendonly yes and appendfsync always for acknowledged
// writes to survive a restart.
package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/memdriver"
)

// Backend is the Redis memory backend.
type Backend struct {
	c      *goredis.Client
	prefix string
}

// Open connects to the server url names and checks that it answers.
func Open(ctx context.Context, rawURL string) (*Backend, error) {
	prefix := "agentry:"
	if u, err := url.Parse(rawURL); err == nil {
		q := u.Query()
		if q.Has("prefix") {
			prefix = q.Get("prefix")
			q.Del("prefix")
			u.RawQuery = q.Encode()
			rawURL = u.String()
		}
	}
	opts, err := goredis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("memory (redis): %w", err)
	}
	c := goredis.NewClient(opts)
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("memory (redis) %s: %w", opts.Addr, err)
	}
	return &Backend{c: c, prefix: prefix}, nil
}

func init() {
	memory.Register("redis", func(ctx context.Context, dsn string) (memory.Backend, error) { return Open(ctx, dsn) })
}

// Memory returns the streams.
func (b *Backend) Memory() memory.Memory { return (*streams)(b) }

// DB returns the collections.
func (b *Backend) DB() memory.DB { return (*docs)(b) }

// Close closes the connections.
func (b *Backend) Close() error { return b.c.Close() }

func (b *Backend) key(kind, name string) string { return b.prefix + kind + ":" + name }

func fail(op string, err error) error { return fmt.Errorf("memory (redis): %s: %w", op, err) }

type streams Backend

// appendScript adds an entry (ARGV[2]) with its id as score, records its
// expiry, drops the stream's expired entries and trims it to ARGV[5]
// entries, at once.
var appendScript = goredis.NewScript(`
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
if tonumber(ARGV[3]) > 0 then redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1]) end
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
for _, id in ipairs(gone) do redis.call('ZREMRANGEBYSCORE', KEYS[1], id, id) end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[4]) end
local max = tonumber(ARGV[5])
if max > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(max + 1)) end
return 1`)

func (m *streams) Append(ctx context.Context, e memory.Entry, keep memory.Retention) (memory.Entry, error) {
	if err := memdriver.CheckEntry(e, keep); err != nil {
		return memory.Entry{}, err
	}
	b := (*Backend)(m)
	id, err := b.c.Incr(ctx, b.prefix+"seq").Result()
	if err != nil {
		return memory.Entry{}, fail("append", err)
	}
	e = memdriver.Stamp(ctx, e, keep, id, time.Now())
	data, _ := json.Marshal(e) // strings and times
	var expires int64
	if !e.Expires.IsZero() {
		expires = e.Expires.UnixMicro()
	}
	err = appendScript.Run(ctx, b.c, []string{b.key("m", e.Stream), b.key("x", e.Stream)},
		id, data, expires, e.Time.UnixMicro(), keep.MaxEntries).Err()
	if err != nil {
		return memory.Entry{}, fail("append", err)
	}
	return e, nil
}

// all returns a stream's entries, oldest first.
func (m *streams) all(ctx context.Context, stream string) ([]memory.Entry, error) {
	b := (*Backend)(m)
	members, err := b.c.ZRange(ctx, b.key("m", stream), 0, -1).Result()
	if err != nil {
		return nil, fail("read "+stream, err)
	}
	out := make([]memory.Entry, len(members))
	for i, s := range members {
		if err := json.Unmarshal([]byte(s), &out[i]); err != nil {
			return nil, fail("read "+stream, fmt.Errorf("an entry is not agentry's: %w", err))
		}
	}
	return out, nil
}

func (m *streams) Read(ctx context.Context, stream string, o memory.ReadOptions) ([]memory.Entry, error) {
	if err := memdriver.CheckRead(stream, o); err != nil {
		return nil, err
	}
	all, err := m.all(ctx, stream)
	if err != nil {
		return nil, err
	}
	return memdriver.ReadEntries(all, o, time.Now()), nil
}

func (m *streams) Search(ctx context.Context, query string, o memory.SearchOptions) ([]memory.Hit, error) {
	if err := memdriver.CheckName("stream", o.Stream); err != nil {
		return nil, err
	}
	all, err := m.all(ctx, o.Stream)
	if err != nil {
		return nil, err
	}
	return memdriver.SearchEntries(memdriver.ReadEntries(all, memory.ReadOptions{}, time.Now()), query, o.Limit), nil
}

func (m *streams) Clear(ctx context.Context, stream string) error {
	if err := memdriver.CheckName("stream", stream); err != nil {
		return err
	}
	b := (*Backend)(m)
	if err := b.c.Del(ctx, b.key("m", stream), b.key("x", stream)).Err(); err != nil {
		return fail("clear "+stream, err)
	}
	return nil
}

type docs Backend

func (m *docs) Write(ctx context.Context, d memory.Doc) (memory.Doc, error) {
	d, err := memdriver.CheckDoc(d)
	if err != nil {
		return memory.Doc{}, err
	}
	b := (*Backend)(m)
	d.Time = time.Now().UTC().Truncate(time.Microsecond)
	data, _ := json.Marshal(d) // its value came from JSON (CheckDoc)
	if err := b.c.HSet(ctx, b.key("d", d.Collection), d.Key, data).Err(); err != nil {
		return memory.Doc{}, fail("write "+d.Collection+"/"+d.Key, err)
	}
	return d, nil
}

func (m *docs) Read(ctx context.Context, collection, key string) (memory.Doc, error) {
	if err := errors.Join(memdriver.CheckName("collection", collection), memdriver.CheckName("key", key)); err != nil {
		return memory.Doc{}, err
	}
	b := (*Backend)(m)
	s, err := b.c.HGet(ctx, b.key("d", collection), key).Result()
	if errors.Is(err, goredis.Nil) {
		return memory.Doc{}, fmt.Errorf("%w: %s/%s", memory.ErrNotFound, collection, key)
	}
	if err != nil {
		return memory.Doc{}, fail("read "+collection+"/"+key, err)
	}
	var d memory.Doc
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		return memory.Doc{}, fail("read "+collection+"/"+key, fmt.Errorf("not a document of agentry's: %w", err))
	}
	return d, nil
}

// all returns a collection's documents.
func (m *docs) all(ctx context.Context, collection string) ([]memory.Doc, error) {
	b := (*Backend)(m)
	fields, err := b.c.HGetAll(ctx, b.key("d", collection)).Result()
	if err != nil {
		return nil, fail("read "+collection, err)
	}
	out := make([]memory.Doc, 0, len(fields))
	for key, s := range fields {
		var d memory.Doc
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			return nil, fail("read "+collection+"/"+key, fmt.Errorf("not a document of agentry's: %w", err))
		}
		out = append(out, d)
	}
	return out, nil
}

func (m *docs) Query(ctx context.Context, collection string, q memory.Query) ([]memory.Doc, error) {
	if err := errors.Join(memdriver.CheckName("collection", collection), memdriver.CheckQuery(q)); err != nil {
		return nil, err
	}
	all, err := m.all(ctx, collection)
	if err != nil {
		return nil, err
	}
	return memdriver.Select(all, q)
}

func (m *docs) Search(ctx context.Context, collection, text string, topK int) ([]memory.DocHit, error) {
	if err := memdriver.CheckName("collection", collection); err != nil {
		return nil, err
	}
	all, err := m.all(ctx, collection)
	if err != nil {
		return nil, err
	}
	return memdriver.SearchDocs(all, text, topK), nil
}
