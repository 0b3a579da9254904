package server

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

// The trace viewer (docs/viewer.md): a page of plain HTML, CSS and
// JavaScript embedded in the binary, served at / without a key (it holds
// no data: everything it shows it reads from the API, with the key the
// person gives it). Its files are under /viewer/.
//
//go:embed viewer
var viewerFiles embed.FS

// viewerCSP is the page's Content-Security-Policy: nothing but this
// server, no inline script or style, no frames.
const viewerCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one file of the viewer, read once at New.
type asset struct {
	data  []byte
	etag  string // a quoted hash of data
	ctype string
}

// viewer holds the viewer's files by name ("index.html", "app.js").
type viewer struct {
	files map[string]asset
}

// loadViewer reads the embedded files, hashes each, and points the page
// at its entry files by hash (/viewer/app.js?v=HASH), so that a browser
// keeps them until the binary changes.
func loadViewer() (*viewer, error) {
	v := &viewer{files: map[string]asset{}}
	err := fs.WalkDir(viewerFiles, "viewer", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := viewerFiles.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "viewer/")
		v.files[name] = newAsset(name, data)
		return nil
	})
	if err != nil {
		return nil, err
	}
	index := v.files["index.html"].data
	for name, a := range v.files {
		if name == "index.html" {
			continue
		}
		ref := []byte(`"/viewer/` + name + `"`)
		index = bytes.ReplaceAll(index, ref, []byte(`"/viewer/`+name+`?v=`+strings.Trim(a.etag, `"`)+`"`))
	}
	v.files["index.html"] = newAsset("index.html", index)
	return v, nil
}

func newAsset(name string, data []byte) asset {
	sum := sha256.Sum256(data)
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	return asset{data: data, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: ctype}
}

// index serves the page: never cached without asking (the ETag makes
// asking cheap).
func (v *viewer) index(w http.ResponseWriter, r *http.Request) {
	v.serve(w, r, v.files["index.html"], "no-cache")
}

// file serves one of the page's files: kept for a year when asked for by
// its hash, revalidated otherwise.
func (v *viewer) file(w http.ResponseWriter, r *http.Request) {
	a, ok := v.files[r.PathValue("file")]
	if !ok || r.PathValue("file") == "index.html" {
		http.NotFound(w, r)
		return
	}
	cache := "no-cache"
	if r.URL.Query().Get("v") == strings.Trim(a.etag, `"`) {
		cache = "public, max-age=31536000, immutable"
	}
	v.serve(w, r, a, cache)
}

func (v *viewer) serve(w http.ResponseWriter, r *http.Request, a asset, cache string) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("Content-Security-Policy", viewerCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", cache)
	h.Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.data))
}
