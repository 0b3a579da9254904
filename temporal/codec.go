package temporal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// than in Temporal's history. Workers and clients of one deployment use
// the same store. A store that keeps no blobs (store.Blobs) gives the
// default converter.
func DataConverter(st store.Store) converter.DataConverter {
	b, ok := st.(store.Blobs)
	if !ok {
		return converter.GetDefaultDataConverter()
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), blobCodec{b})
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
