package placement

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// acceptsJSON reports whether an Accept header admits application/json.
func acceptsJSON(accept string) bool {
	if accept == "" {
		return true
	}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if q, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
				continue
			}
		}
		switch mt {
		case "application/json", "application/*", "*/*":
			return true
		}
	}
	return false
}

// checkAccept is the 406 for GET handlers when JSON is not acceptable.
func checkAccept(r *http.Request) error {
	if !acceptsJSON(r.Header.Get("Accept")) {
		return errStatus(http.StatusNotAcceptable, "Only application/json is provided")
	}
	return nil
}

// readBody enforces Placement's body rules (content type required with a
// body, JSON only, integer content-length) and returns the raw bytes.
func readBody(r *http.Request) ([]byte, error) {
	if cl := r.Header.Get("Content-Length"); cl != "" {
		if _, err := strconv.Atoi(cl); err != nil {
			return nil, errStatus(http.StatusBadRequest, "content-length header must be an integer")
		}
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if r.ContentLength > 0 {
			return nil, errStatus(http.StatusBadRequest, "content-type header required when content-length > 0")
		}
		return nil, errStatus(http.StatusUnsupportedMediaType, "The media type None is not supported, use application/json")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return nil, errStatus(http.StatusUnsupportedMediaType, "The media type "+ct+" is not supported, use application/json")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return nil, errStatus(http.StatusBadRequest, "could not read the request body: "+err.Error())
	}
	return body, nil
}

// writeJSON writes body with status. From 1.15, responses with a body
// carry Cache-Control: no-cache and Last-Modified (lastMod, or now when
// nothing in the database dates the response).
func writeJSON(w http.ResponseWriter, r *http.Request, status int, body any, lastMod time.Time) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	if ctxVersion(r.Context()).AtLeast(1, 15) {
		setCacheHeaders(w, lastMod)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(b)
	return err
}

func setCacheHeaders(w http.ResponseWriter, lastMod time.Time) {
	if lastMod.IsZero() {
		lastMod = time.Now()
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Last-Modified", lastMod.UTC().Format(http.TimeFormat))
}

// noContent writes a 204.
func noContent(w http.ResponseWriter) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// absURL makes an absolute URL for a Location header from a path relative
// to the API root, honouring a /placement mount prefix.
func absURL(r *http.Request, path string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p != "" {
		scheme = p
	}
	return scheme + "://" + r.Host + prefix(r) + path
}

type prefixKey struct{}

// prefix is the mount point of the API ("" or "/placement") so that links
// and Locations include it, as SCRIPT_NAME does upstream.
func prefix(r *http.Request) string {
	p, _ := r.Context().Value(prefixKey{}).(string)
	return p
}

// latest returns the latest of the given times.
func latest(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}
