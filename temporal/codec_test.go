package temporal

import (
	"bytes"
	"context"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/agentry/agentry/internal/teststore"
	"github.com/agentry/agentry/store"
)

// TestCodecsAttacked: what a worker reads back from Temporal's history
// or the run store is what was written, or an error: a sealed payload
// changed, cut, or sealed by another key does not open; a blob changed
// in the store does not match its digest; a payload written before the
// key was set still reads. A key of the wrong size is refused.
func TestCodecsAttacked(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	seal, err := newSealCodec(key)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := newSealCodec(bytes.Repeat([]byte{8}, 32))
	if _, err := newSealCodec(key[:16]); err == nil || !strings.Contains(err.Error(), "want 32") {
		t.Errorf("a 16-byte key: %v", err)
	}
	secret := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte("json/plain")}, Data: []byte(`"the input"`)}
	sealed, err := seal.Encode([]*commonpb.Payload{secret})
	if err != nil || bytes.Contains(sealed[0].Data, []byte("the input")) {
		t.Fatalf("sealed: %v, %q", err, sealed[0].Data)
	}
	if back, err := seal.Decode(sealed); err != nil || string(back[0].Data) != `"the input"` {
		t.Fatalf("opened: %v, %v", back, err)
	}
	flip := func(p *commonpb.Payload, i int) *commonpb.Payload {
		d := bytes.Clone(p.Data)
		d[i] ^= 1
		return &commonpb.Payload{Metadata: p.Metadata, Data: d}
	}
	for _, tc := range []struct {
		name  string
		codec sealCodec
		p     *commonpb.Payload
		want  string
	}{
		{"a byte changed", seal, flip(sealed[0], len(sealed[0].Data)-1), "does not open"},
		{"its nonce changed", seal, flip(sealed[0], 0), "does not open"},
		{"cut short", seal, &commonpb.Payload{Metadata: sealed[0].Metadata, Data: sealed[0].Data[:5]}, "too short"},
		{"another key", other, sealed[0], "does not open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.codec.Decode([]*commonpb.Payload{tc.p}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode = %v, want %q", err, tc.want)
			}
		})
	}
	if back, err := seal.Decode([]*commonpb.Payload{secret}); err != nil || back[0] != secret {
		t.Errorf("a payload from before the key: %v, %v", back, err)
	}

	// Blobs: a large payload goes to the store, a reference stays.
	st := teststore.Open(t)
	blobs, ok := st.(store.Blobs)
	if !ok {
		t.Fatal("the test store keeps no blobs")
	}
	bc := blobCodec{blobs}
	large := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte("json/plain")}, Data: bytes.Repeat([]byte("x"), BlobLimit+1)}
	refs, err := bc.Encode([]*commonpb.Payload{large, secret})
	if err != nil || string(refs[0].Metadata[converter.MetadataEncoding]) != blobEncoding || refs[1] != secret {
		t.Fatalf("encoded: %v", err)
	}
	if back, err := bc.Decode(refs); err != nil || !bytes.Equal(back[0].Data, large.Data) {
		t.Fatalf("decoded: %v", err)
	}
	ctx := context.Background()
	// The store's copy replaced under the same key: refused by its digest.
	forged := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(blobEncoding)}, Data: []byte("sha256:" + strings.Repeat("0", 64))}
	if err := blobs.PutBlob(ctx, string(forged.Data), []byte("not what was kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := bc.Decode([]*commonpb.Payload{forged}); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Errorf("a blob that is not its digest's: %v", err)
	}
	missing := &commonpb.Payload{Metadata: forged.Metadata, Data: []byte("sha256:" + strings.Repeat("1", 64))}
	if _, err := bc.Decode([]*commonpb.Payload{missing}); err == nil || !strings.Contains(err.Error(), "kept in the store") {
		t.Errorf("a blob the store does not have: %v", err)
	}

	// Both, as a worker with a key uses them: the store keeps sealed bytes.
	dc, err := DataConverter(st, key)
	if err != nil {
		t.Fatal(err)
	}
	p, err := dc.ToPayload(strings.Repeat("private ", BlobLimit/4))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := blobs.Blob(ctx, string(p.Data))
	if err != nil || bytes.Contains(kept, []byte("private")) {
		t.Errorf("the store's copy of a sealed payload: %v, in the clear: %v", err, bytes.Contains(kept, []byte("private")))
	}
	var back string
	if err := dc.FromPayload(p, &back); err != nil || !strings.HasPrefix(back, "private ") {
		t.Errorf("read back: %v", err)
	}
	if _, err := DataConverter(st, key[:3]); err == nil {
		t.Error("a converter with a 3-byte key")
	}
}
