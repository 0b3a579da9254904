package runlog

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/store"
)

// ErrSealed is matched by the error of reading a sealed run log without
// its key (or with another), and of reading, with a key, a record that is
// not sealed or was moved, dropped or reordered.
var ErrSealed = errors.New("run log is sealed")

// Sealer seals a run log's records with AES-256-GCM: each record's data
// (the transcript, model calls, tool inputs and outputs, events, the
// Result) is encrypted and bound to its run, its kind, its key, its turn
// and its place among the run's sealed records, so that one moved to
// another run or place, or dropped, does not open. What the store selects
// by (the run's name, status and summary, a record's kind, turn and key)
// stays readable.
type Sealer struct{ aead cipher.AEAD }

// NewSealer returns a Sealer for a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("runlog: encryption key: want 32 bytes (AES-256), got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("runlog: encryption key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// sealedPrefix starts the JSON string a sealed record's data is.
const sealedPrefix = "agentry-sealed-record:v1:"

// bind is what a record is bound to: its run, kind, key, turn and place.
func bind(runID string, rec *store.Record, n uint64) []byte {
	return []byte(runID + "\x00" + string(rec.Kind) + "\x00" + rec.Key + "\x00" + strconv.Itoa(rec.Turn) + "\x00" + strconv.FormatUint(n, 10))
}

// Seal replaces rec's data with its sealed form, the n-th sealed record
// of runID's log (counting from 1), as a writer of a sealed log does;
// Read and an Opener undo it, in order.
func (s *Sealer) Seal(runID string, rec *store.Record, n uint64) {
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	var place [8]byte
	binary.BigEndian.PutUint64(place[:], n)
	out := append(place[:], nonce...)
	out = s.aead.Seal(out, nonce, rec.Data, bind(runID, rec, n))
	text, _ := json.Marshal(sealedPrefix + base64.RawStdEncoding.EncodeToString(out))
	rec.Data = text
}

// sealedPlace reports whether data is a sealed record, and its body.
func sealedBody(data json.RawMessage) ([]byte, bool) {
	if len(data) == 0 || data[0] != '"' {
		return nil, false
	}
	var s string
	if json.Unmarshal(data, &s) != nil {
		return nil, false
	}
	body, ok := strings.CutPrefix(s, sealedPrefix)
	if !ok {
		return nil, false
	}
	raw, err := base64.RawStdEncoding.DecodeString(body)
	if err != nil {
		return nil, false
	}
	return raw, true
}

// Opener opens a run's records one by one, in order from the first, as
// Read does: for a reader that follows a log as it grows (an event
// stream). With a nil Sealer it refuses sealed records and passes the
// others through.
type Opener struct{ o opener }

// NewOpener returns an Opener of runID's records, sealed with s.
func NewOpener(s *Sealer, runID string) *Opener { return &Opener{opener{s: s, runID: runID}} }

// Open replaces rec's data with what it holds. Records must come in
// order, every one of the log from its first: a sealed record out of its
// place is refused (ErrSealed).
func (o *Opener) Open(rec *store.Record) error { return o.o.open(rec) }

// opener opens a run's records in order, checking that each sealed one
// comes at its place.
type opener struct {
	s     *Sealer
	runID string
	n     uint64 // sealed records opened so far
}

// open replaces a sealed record's data with what it holds. With a key,
// a record that is not sealed is refused; without one, a sealed record
// is.
func (o *opener) open(rec *store.Record) error {
	raw, sealed := sealedBody(rec.Data)
	switch {
	case !sealed && o.s == nil:
		return nil
	case !sealed:
		return fmt.Errorf("%w: record %d (%s) is not sealed, and with a key only sealed records are read (written without the key, or not by agentry)", ErrSealed, rec.Seq, rec.Kind)
	case o.s == nil:
		return fmt.Errorf("%w: run %s's log is encrypted and no key was given (agent.WithEncryptionKey; the binary reads %s)", ErrSealed, o.runID, memory.KeyEnv)
	}
	ns := o.s.aead.NonceSize()
	if len(raw) < 8+ns {
		return fmt.Errorf("%w: record %d (%s) is damaged", ErrSealed, rec.Seq, rec.Kind)
	}
	n := binary.BigEndian.Uint64(raw[:8])
	if n != o.n+1 {
		return fmt.Errorf("%w: record %d (%s) is sealed record %d of the run, where %d was due: the log was reordered or cut", ErrSealed, rec.Seq, rec.Kind, n, o.n+1)
	}
	data, err := o.s.aead.Open(nil, raw[8:8+ns], raw[8+ns:], bind(o.runID, rec, n))
	if err != nil {
		return fmt.Errorf("%w: record %d (%s) does not open with this key (another key, or moved from another run or place)", ErrSealed, rec.Seq, rec.Kind)
	}
	o.n = n
	rec.Data = data
	return nil
}

// OpenRecord opens one record of runID's log by itself, out of the
// order Read keeps (a conversation's history, read without the rest of
// its run's log): a sealed record is bound to the place its sealed data
// names. With a nil Sealer a sealed record is refused; without one, a
// record that is not sealed.
func OpenRecord(s *Sealer, runID string, rec *store.Record) error {
	o := opener{s: s, runID: runID}
	if raw, sealed := sealedBody(rec.Data); sealed && len(raw) >= 8 {
		o.n = binary.BigEndian.Uint64(raw[:8]) - 1
	}
	return o.open(rec)
}

// SealedError stands in a sealed run's summary for its error message,
// which is in its sealed result record.
const SealedError = "the error is sealed in the run's log"
