package temporal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/agentry/agentry/store"
)

// BlobLimit is the size above which a payload is kept in the run store,
// with a reference in Temporal's history in its place: well under the
// server's limits (a warning at 512 KiB, a refusal at 2 MiB a payload).
const BlobLimit = 128 << 10

// blobEncoding marks a payload that is a reference to a blob.
const blobEncoding = "agentry/blob"

// DataConverter is the data converter of a client or worker whose runs'
// large payloads (a tool's long result, a Result with a long transcript,
// a long input) are kept in st, under the digest of their bytes, rather
// than in Temporal's history; with a key (32 bytes, AGENTRY_ENCRYPTION_KEY
// for the binary), every payload is sealed first (AES-256-GCM), so that
// neither Temporal's history nor the store holds a run's data (its input,
// the model's arguments, the tools' results) in the clear. Workers and
// clients of one deployment use the same store and key. A store that
// keeps no blobs (store.Blobs) keeps nothing out of the history.
func DataConverter(st store.Store, key []byte) (converter.DataConverter, error) {
	var codecs []converter.PayloadCodec
	if b, ok := st.(store.Blobs); ok {
		codecs = append(codecs, blobCodec{b})
	}
	if key != nil {
		s, err := newSealCodec(key)
		if err != nil {
			return nil, err
		}
		codecs = append(codecs, s) // applied first: the blobs hold sealed payloads
	}
	if len(codecs) == 0 {
		return converter.GetDefaultDataConverter(), nil
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), codecs...), nil
}

// sealEncoding marks a sealed payload.
const sealEncoding = "agentry/sealed"

// sealAAD binds a sealed payload to its use.
var sealAAD = []byte("agentry.temporal.payload/v1")

// sealCodec seals payloads with AES-256-GCM.
type sealCodec struct{ aead cipher.AEAD }

func newSealCodec(key []byte) (sealCodec, error) {
	if len(key) != 32 {
		return sealCodec{}, fmt.Errorf("temporal: the payload key has %d bytes; want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return sealCodec{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sealCodec{}, err
	}
	return sealCodec{aead}, nil
}

func (c sealCodec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		data, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		nonce := make([]byte, c.aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(sealEncoding)},
			Data: c.aead.Seal(nonce, nonce, data, sealAAD)}
	}
	return out, nil
}

func (c sealCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != sealEncoding {
			out[i] = p // written before the key was set
			continue
		}
		n := c.aead.NonceSize()
		if len(p.GetData()) < n {
			return nil, errors.New("temporal: a sealed payload too short to open")
		}
		data, err := c.aead.Open(nil, p.Data[:n], p.Data[n:], sealAAD)
		if err != nil {
			return nil, errors.New("temporal: a sealed payload does not open with this key (another key sealed it, or it was changed)")
		}
		var orig commonpb.Payload
		if err := proto.Unmarshal(data, &orig); err != nil {
			return nil, fmt.Errorf("temporal: a sealed payload: %w", err)
		}
		out[i] = &orig
	}
	return out, nil
}

// blobCodec moves payloads over BlobLimit to the store and back.
type blobCodec struct{ b store.Blobs }

// blobTimeout bounds one blob's read or write.
const blobTimeout = 30 * time.Second

func (c blobCodec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if proto.Size(p) <= BlobLimit {
			out[i] = p
			continue
		}
		data, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		key := "sha256:" + hex.EncodeToString(sum[:])
		ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
		err = c.b.PutBlob(ctx, key, data)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("temporal: keep a payload of %d bytes in the store: %w", len(data), err)
		}
		out[i] = &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(blobEncoding)}, Data: []byte(key)}
	}
	return out, nil
}

func (c blobCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != blobEncoding {
			out[i] = p
			continue
		}
		key := string(p.GetData())
		ctx, cancel := context.WithTimeout(context.Background(), blobTimeout)
		data, err := c.b.Blob(ctx, key)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("temporal: a payload kept in the store: %w", err)
		}
		if sum := sha256.Sum256(data); "sha256:"+hex.EncodeToString(sum[:]) != key {
			return nil, fmt.Errorf("temporal: the payload kept as %s does not match its digest", key)
		}
		var orig commonpb.Payload
		if err := proto.Unmarshal(data, &orig); err != nil {
			return nil, fmt.Errorf("temporal: the payload kept as %s: %w", key, err)
		}
		out[i] = &orig
	}
	return out, nil
}
