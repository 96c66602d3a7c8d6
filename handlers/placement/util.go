package placement

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/pkg/errs"
)

// acceptableOffers is webob's Accept.acceptable_offers: the offers the
// Accept header admits, best quality first (ties in offers' order). Each
// offer takes the quality of the most specific media range matching it;
// quality 0 excludes it. A header webob cannot parse admits every offer.
func acceptableOffers(accept string, offers []string) []string {
	type mediaRange struct {
		typ, sub string
		params   string
		q        float64
	}
	var ranges []mediaRange
	valid := true
	for _, part := range strings.Split(accept, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		fields := strings.Split(part, ";")
		mt := strings.ToLower(strings.TrimSpace(fields[0]))
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok || typ == "" || sub == "" || (typ == "*" && sub != "*") {
			valid = false
			break
		}
		mr := mediaRange{typ: typ, sub: sub, q: 1}
		var params []string
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
			if !ok {
				valid = false
				break
			}
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || q < 0 || q > 1 {
					valid = false
					break
				}
				mr.q = q
				break // what follows q are extension parameters
			}
			params = append(params, strings.ToLower(strings.TrimSpace(k))+"="+strings.TrimSpace(v))
		}
		mr.params = strings.Join(params, ";")
		ranges = append(ranges, mr)
	}
	if !valid {
		return append([]string(nil), offers...)
	}
	type scored struct {
		offer       string
		q           float64
		idx, specif int
	}
	var out []scored
	for i, offer := range offers {
		typ, sub, _ := strings.Cut(strings.ToLower(offer), "/")
		best := scored{offer: offer, idx: i, specif: 0}
		for _, mr := range ranges {
			var sp int
			switch {
			case mr.typ == "*" && mr.sub == "*":
				sp = 1
			case mr.sub == "*":
				if mr.typ != typ {
					continue
				}
				sp = 2
			case mr.typ == typ && mr.sub == sub:
				if mr.params != "" {
					continue // the offers carry no parameters
				}
				sp = 3
			default:
				continue
			}
			if sp <= best.specif {
				continue
			}
			best.specif, best.q = sp, mr.q
		}
		if best.specif > 0 && best.q != 0 {
			out = append(out, best)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].q > out[b].q })
	res := make([]string, len(out))
	for i, o := range out {
		res[i] = o.offer
	}
	return res
}

// checkAccept is util.check_accept('application/json'): 406 when an
// Accept header is given and does not admit JSON.
func checkAccept(r *http.Request) error {
	acc := r.Header.Get("Accept")
	if acc == "" || acc == "application/json" {
		return nil
	}
	if len(acceptableOffers(acc, []string{"application/json"})) == 0 {
		return errOf(errs.NotAcceptable, "Only application/json is provided")
	}
	return nil
}

// requireJSONContent is util.require_content('application/json'): the
// request's media type (Content-Type up to any ';', compared exactly)
// must be application/json, else 415.
func requireJSONContent(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, _ := strings.Cut(ct, ";")
	if mt != "application/json" {
		if mt == "" {
			mt = "None"
		}
		return errOf(errs.UnsupportedMediaType, "The media type "+mt+" is not supported, use application/json")
	}
	return nil
}

// readBody enforces Placement's body rules (JSON media type required) and
// returns the raw bytes. The Content-Length rules are checked for every
// request by contentHeaderCheck.
func readBody(r *http.Request) ([]byte, error) {
	if err := requireJSONContent(r); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return nil, errOf(errs.BadRequest, "could not read the request body: "+err.Error())
	}
	return body, nil
}

// writeJSON writes body with status. From 1.15, responses with a body
// carry Cache-Control: no-cache and Last-Modified (lastMod, or now when
// nothing in the database dates the response).
func writeJSON(w http.ResponseWriter, r *http.Request, status int, body any, lastMod time.Time) error {
	return writeJSONHeaders(w, r, status, body, lastMod, true)
}

// writeJSONLM is writeJSON where, from 1.15, Last-Modified is lastMod
// when haveLM, and absent otherwise (upstream sets it to None when no
// object dates the response, e.g. an empty inventory list).
func writeJSONLM(w http.ResponseWriter, r *http.Request, status int, body any, lastMod time.Time, haveLM bool) error {
	return writeJSONHeaders(w, r, status, body, lastMod, haveLM)
}

func writeJSONHeaders(w http.ResponseWriter, r *http.Request, status int, body any, lastMod time.Time, haveLM bool) error {
	buf := jsonBufs.Get().(*bytes.Buffer)
	defer putJSONBuf(buf)
	if err := encodeJSON(buf, body); err != nil {
		return err
	}
	h := w.Header()
	if ctxVersion(r.Context()).AtLeast(1, 15) {
		h["Cache-Control"] = noCache
		if haveLM {
			if lastMod.IsZero() {
				lastMod = time.Now()
			}
			h["Last-Modified"] = []string{lastMod.UTC().Format(http.TimeFormat)}
		}
	}
	h["Content-Type"] = contentTypeJSON
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

var (
	noCache         = []string{"no-cache"}
	contentTypeJSON = []string{"application/json"}
)

// pyFloat marshals a float64 as Python's json.dumps does (repr: 1.0,
// 1.5, 1e+16, 3.40282e+38).
type pyFloat float64

// MarshalJSON implements json.Marshaler.
func (f pyFloat) MarshalJSON() ([]byte, error) { return []byte(pyFloatRepr(float64(f))), nil }

// pyFloatRepr is Python's repr(float).
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	abs := math.Abs(f)
	if abs >= 1e-4 && abs < 1e16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[0]
	exp = strings.TrimLeft(exp[1:], "0")
	if len(exp) < 2 {
		exp = strings.Repeat("0", 2-len(exp)) + exp
	}
	return mant + "e" + string(sign) + exp
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

// timeNow is the Last-Modified of responses nothing in the database
// dates.
func timeNow() time.Time { return time.Now().UTC() }

// marshalJSON encodes v as Python's json.dumps would escape it: no HTML
// escaping of <, > and & (clients and the conformance suite compare the
// text).
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := encodeJSON(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// encodeJSON is marshalJSON into buf.
func encodeJSON(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	return nil
}

// jsonBufs recycles the encoding buffers of responses.
var jsonBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putJSONBuf(buf *bytes.Buffer) {
	if buf.Cap() <= 64<<10 {
		buf.Reset()
		jsonBufs.Put(buf)
	}
}
