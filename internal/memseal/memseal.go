// Package memseal encrypts what an agent keeps in memory: a backend
// wrapped so that entries' texts and documents' values reach it sealed.
package memseal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/memdriver"
)

// sealedPrefix marks a sealed text: the format, then the nonce and the
// ciphertext in base64.
const sealedPrefix = "agentry-sealed:v1:"

// sealedField is the only field of a sealed document's value as stored.
const sealedField = "agentry_sealed"

// New wraps b so that what reaches it is encrypted with AES-256-GCM
// under key, and authenticated: an entry's text is bound to its stream,
// its id and its kind, and a document's value to its collection and key,
// so that one moved elsewhere, replayed as a new entry or swapped with
// another does not open. Names, kinds, authors and times stay readable
// (they are what backends select by). Searches and queries then run in
// the process over the opened entries and documents, since the
// backend's own index sees only ciphertext.
//
// With a key, only sealed values are read: a plain text or document
// (written before a key was given, or planted by whoever can write the
// database) is an ErrSealed, never memory. With a nil key nothing is
// encrypted, and reading something sealed is an ErrSealed that says the
// key is missing.
func New(b memory.Backend, key []byte) (*Backend, error) {
	s := &Backend{b: b}
	if key != nil {
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("memory: encryption key: %w", err)
		}
		if len(key) != 32 {
			return nil, fmt.Errorf("memory: encryption key: want 32 bytes (AES-256), got %d", len(key))
		}
		if s.aead, err = cipher.NewGCM(block); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Backend is a Backend whose values are sealed (see Sealed). Its
// SealText and OpenText seal other texts under the same key.
type Backend struct {
	b    memory.Backend
	aead cipher.AEAD // nil: no key
}

type sealed = Backend

// Memory returns the sealed streams.
func (s *Backend) Memory() memory.Memory { return (*sealedStreams)(s) }

// DB returns the sealed collections.
func (s *Backend) DB() memory.DB { return (*sealedDocs)(s) }

// Close closes the backend it wraps.
func (s *Backend) Close() error { return s.b.Close() }

// SealText seals text bound to bind (what names it: a text opens only
// with the same bind). Without a key, or empty, it returns text as it is.
func (s *Backend) SealText(text, bind string) string {
	if s.aead == nil || text == "" {
		return text
	}
	return s.seal(text, bind)
}

// OpenText opens what SealText sealed with the same bind; what names the
// text in errors. With a key, a text that is not sealed is refused; an
// empty text, which SealText leaves empty, is empty.
func (s *Backend) OpenText(text, bind, what string) (string, error) {
	if text == "" {
		return "", nil
	}
	return s.open(text, bind, what)
}

func (s *sealed) seal(text, bind string) string {
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(text), []byte(bind)))
}

// open returns text opened; what names the thing, for errors.
func (s *sealed) open(text, bind, what string) (string, error) {
	body, ok := strings.CutPrefix(text, sealedPrefix)
	switch {
	case !ok && s.aead != nil:
		return "", fmt.Errorf("%w: %s is not sealed, and with a key only sealed values are read (written without the key, or not by agentry)", memory.ErrSealed, what)
	case !ok:
		return text, nil
	case s.aead == nil:
		return "", fmt.Errorf("%w: %s is encrypted and no key was given (set %s)", memory.ErrSealed, what, memory.KeyEnv)
	}
	raw, err := base64.RawStdEncoding.DecodeString(body)
	n := s.aead.NonceSize()
	if err != nil || len(raw) < n {
		return "", fmt.Errorf("%w: %s is not a sealed text agentry wrote", memory.ErrSealed, what)
	}
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(bind))
	if err != nil {
		return "", fmt.Errorf("%w: %s does not open with this key (a wrong key, or it was changed or moved)", memory.ErrSealed, what)
	}
	return string(plain), nil
}

type sealedStreams sealed

// bindEntry is what an entry's text is bound to.
func bindEntry(stream, kind string, id int64) string {
	return stream + "\x00" + kind + "\x00" + strconv.FormatInt(id, 10)
}

func (m *sealedStreams) Append(ctx context.Context, e memory.Entry, keep memory.Retention) (memory.Entry, error) {
	s := (*sealed)(m)
	if s.aead == nil {
		return s.b.Memory().Append(ctx, e, keep)
	}
	if err := memdriver.CheckEntry(e, keep); err != nil {
		return memory.Entry{}, err // checked on the plain text: a sealed one is never empty
	}
	plain, stream, kind := e.Text, e.Stream, e.Kind
	seal := func(id int64) string { return s.seal(plain, bindEntry(stream, kind, id)) }
	// Until the backend knows the id, the text is sealed to none: a
	// backend that never calls Stamp or TextFor stores what opens nowhere,
	// never the plain text.
	e.Text = seal(0)
	out, err := s.b.Memory().Append(memdriver.WithSeal(ctx, seal), e, keep)
	out.Text = plain
	return out, err
}

func (m *sealedStreams) openAll(entries []memory.Entry) ([]memory.Entry, error) {
	s := (*sealed)(m)
	for i := range entries {
		e := &entries[i]
		var err error
		if e.Text, err = s.open(e.Text, bindEntry(e.Stream, e.Kind, e.ID), fmt.Sprintf("entry %d of %s", e.ID, e.Stream)); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

func (m *sealedStreams) Read(ctx context.Context, stream string, o memory.ReadOptions) ([]memory.Entry, error) {
	entries, err := (*sealed)(m).b.Memory().Read(ctx, stream, o)
	if err != nil {
		return nil, err
	}
	return m.openAll(entries)
}

func (m *sealedStreams) Search(ctx context.Context, query string, o memory.SearchOptions) ([]memory.Hit, error) {
	s := (*sealed)(m)
	if s.aead == nil {
		// The backend's index sees sealed text as noise: a stream whose
		// newest entry is sealed is refused rather than searched in vain.
		if _, err := m.Read(ctx, o.Stream, memory.ReadOptions{Limit: 1, Order: memory.Newest}); err != nil {
			return nil, err
		}
		return s.b.Memory().Search(ctx, query, o)
	}
	if err := memdriver.CheckName("stream", o.Stream); err != nil {
		return nil, err
	}
	entries, err := m.Read(ctx, o.Stream, memory.ReadOptions{})
	if err != nil {
		return nil, err
	}
	return memdriver.SearchEntries(entries, query, o.Limit), nil
}

func (m *sealedStreams) Clear(ctx context.Context, stream string) error {
	return (*sealed)(m).b.Memory().Clear(ctx, stream)
}

type sealedDocs sealed

func bindDoc(collection, key string) string { return collection + "\x00" + key }

func (m *sealedDocs) Write(ctx context.Context, d memory.Doc) (memory.Doc, error) {
	s := (*sealed)(m)
	if s.aead == nil {
		return s.b.DB().Write(ctx, d)
	}
	d, err := memdriver.CheckDoc(d)
	if err != nil {
		return memory.Doc{}, err
	}
	plain := d.Value
	data, _ := json.Marshal(plain) // CheckDoc took a value that encodes
	d.Value = map[string]any{sealedField: s.seal(string(data), bindDoc(d.Collection, d.Key))}
	out, err := s.b.DB().Write(ctx, d)
	out.Value = plain
	return out, err
}

func (m *sealedDocs) openDoc(d memory.Doc) (memory.Doc, error) {
	s := (*sealed)(m)
	text, ok := d.Value[sealedField].(string)
	if !ok || len(d.Value) != 1 {
		if s.aead != nil {
			return memory.Doc{}, fmt.Errorf("%w: document %s/%s is not sealed, and with a key only sealed values are read", memory.ErrSealed, d.Collection, d.Key)
		}
		return d, nil
	}
	plain, err := s.open(text, bindDoc(d.Collection, d.Key), "document "+d.Collection+"/"+d.Key)
	if err != nil {
		return memory.Doc{}, err
	}
	d.Value = nil
	if err := json.Unmarshal([]byte(plain), &d.Value); err != nil {
		return memory.Doc{}, fmt.Errorf("%w: document %s/%s opened to something that is not JSON", memory.ErrSealed, d.Collection, d.Key)
	}
	return d, nil
}

func (m *sealedDocs) Read(ctx context.Context, collection, key string) (memory.Doc, error) {
	d, err := (*sealed)(m).b.DB().Read(ctx, collection, key)
	if err != nil {
		return d, err
	}
	return m.openDoc(d)
}

// all returns a collection's documents, opened.
func (m *sealedDocs) all(ctx context.Context, collection string) ([]memory.Doc, error) {
	docs, err := (*sealed)(m).b.DB().Query(ctx, collection, memory.Query{Limit: 1 << 30})
	if err != nil {
		return nil, err
	}
	for i := range docs {
		if docs[i], err = m.openDoc(docs[i]); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

func (m *sealedDocs) Query(ctx context.Context, collection string, q memory.Query) ([]memory.Doc, error) {
	if err := errors.Join(memdriver.CheckName("collection", collection), memdriver.CheckQuery(q)); err != nil {
		return nil, err
	}
	if (*sealed)(m).aead == nil {
		docs, err := (*sealed)(m).b.DB().Query(ctx, collection, q)
		for i := 0; err == nil && i < len(docs); i++ {
			docs[i], err = m.openDoc(docs[i]) // a sealed one is an ErrSealed
		}
		return docs, err
	}
	docs, err := m.all(ctx, collection)
	if err != nil {
		return nil, err
	}
	return memdriver.Select(docs, q)
}

func (m *sealedDocs) Search(ctx context.Context, collection, text string, topK int) ([]memory.DocHit, error) {
	if err := memdriver.CheckName("collection", collection); err != nil {
		return nil, err
	}
	if (*sealed)(m).aead == nil {
		hits, err := (*sealed)(m).b.DB().Search(ctx, collection, text, topK)
		for i := 0; err == nil && i < len(hits); i++ {
			hits[i].Doc, err = m.openDoc(hits[i].Doc)
		}
		return hits, err
	}
	docs, err := m.all(ctx, collection)
	if err != nil {
		return nil, err
	}
	return memdriver.SearchDocs(docs, text, topK), nil
}
