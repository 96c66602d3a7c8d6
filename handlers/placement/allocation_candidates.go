package placement

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/pkg/placement/candidates"
)

func (a *API) registerAllocationCandidateRoutes(v func(int) microversion.Version) {
	a.route("GET", "/allocation_candidates", v(10), a.listAllocationCandidates)
}

// listAllocationCandidates handles GET /allocation_candidates (1.10+).
func (a *API) listAllocationCandidates(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:allocation_candidates:list", ""); err != nil {
		return err
	}
	mv := ctxVersion(r.Context())
	req, err := placement.ParseCandidatesQuery(r.URL.RawQuery, mv)
	if err != nil {
		return err
	}
	res, err := a.svc.AllocationCandidates(r.Context(), req, placement.CandidateOptions{
		MaxCandidates: a.cfg.MaxAllocationCandidates,
		Randomize:     a.cfg.RandomizeAllocationCandidates,
		SearchCap:     a.cfg.AllocationCandidatesSearchCap,
	})
	if err != nil {
		return err
	}
	bp, _ := renderBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	started := false
	start := func() {
		if mv.AtLeast(1, 15) {
			setCacheHeaders(w, time.Time{})
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		started = true
	}
	// A huge answer (tens of MB for a wide tree) goes out in pieces as
	// it is encoded, so its memory is one buffer, not the whole body;
	// an answer that fits in the first piece gets a Content-Length.
	body, err := appendCandidates((*bp)[:0], res, req, mv, func(b []byte) error {
		if !started {
			start()
		}
		_, err := w.Write(b)
		return err
	})
	// Write errors are not returned: the status is sent by then, and a
	// failed write only means the client left.
	if err == nil {
		if !started {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			start()
		}
		_, _ = w.Write(body)
	}
	if cap(body) <= maxPooledRender {
		*bp = body
		renderBufs.Put(bp)
	}
	return nil
}

// renderBufs recycles answer buffers: a few hundred KB per request
// otherwise, allocated, zeroed and collected each time.
var renderBufs sync.Pool

const (
	maxPooledRender = 4 << 20
	// flushAt is how much encoded answer is held before it is written.
	flushAt = 1 << 20
)

// renderCandidates encodes the whole result for microversion mv into a
// new buffer.
func renderCandidates(res *candidates.Result, req *candidates.Request, mv microversion.Version) []byte {
	b, _ := appendCandidates(nil, res, req, mv, nil)
	return b
}

// acFrags are JSON pieces of one snapshot's providers and classes,
// encoded once per snapshot (the snapshot changes with every write, so
// all pieces share one buffer): a candidate is then mostly copies.
type acFrags struct {
	quoted [][]byte // provider index → `"uuid"`
	class  [][]byte // class index → `"CLASS": `
}

func snapshotFrags(snap *candidates.Snapshot) *acFrags {
	return snap.Memo("placement/ac-json-frags", func() any {
		n, nc := snap.ProviderCount(), snap.ClassCount()
		f := &acFrags{quoted: make([][]byte, n), class: make([][]byte, nc)}
		buf := make([]byte, 0, n*38+nc*24)
		carve := func(from int) []byte { return buf[from:len(buf):len(buf)] }
		for p := range f.quoted {
			at := len(buf)
			buf = appendJSONString(buf, snap.ProviderUUID(int32(p)))
			f.quoted[p] = carve(at)
		}
		for c := range f.class {
			at := len(buf)
			buf = append(appendJSONString(buf, snap.ClassName(int32(c))), ": "...)
			f.class[c] = carve(at)
		}
		return f
	}).(*acFrags)
}

// appendCandidates appends the result encoded for microversion mv to b.
// With a flush function, it hands over b whenever it grows past flushAt
// and goes on in the same buffer; it returns what is left to write. It
// writes the JSON by hand: a big answer (thousands of candidates and
// summaries) is encoded many times faster than through maps and
// encoding/json.
func appendCandidates(b []byte, res *candidates.Result, req *candidates.Request, mv microversion.Version, flush func([]byte) error) ([]byte, error) {
	n := res.Len()
	if flush == nil {
		if need := 256 + n*448 + len(res.Summaries)*320; cap(b)-len(b) < need {
			b = append(make([]byte, 0, len(b)+need), b...)
		}
	}
	maybeFlush := func() error {
		if flush == nil || len(b) < flushAt {
			return nil
		}
		err := flush(b)
		b = b[:0]
		return err
	}
	b = append(b, `{"allocation_requests": [`...)
	dict, withMappings := mv.AtLeast(1, 12), mv.AtLeast(1, 34)
	var f *acFrags
	if n > 0 {
		f = snapshotFrags(res.Snapshot)
	}
	var suffixes [][]byte // `"SUFFIX": [`, in mappings order
	if withMappings {
		for k := 0; k < res.Groups(); k++ {
			suffixes = append(suffixes, append(appendJSONString(nil, res.Suffix(k)), ": ["...))
		}
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ", "...)
		}
		if dict {
			b = append(b, `{"allocations": {`...)
		} else {
			b = append(b, `{"allocations": [`...)
		}
		allocs := res.Allocs(i)
		for j, al := range allocs {
			if j == 0 || allocs[j-1].Provider != al.Provider {
				if j > 0 {
					b = append(b, "}}, "...)
				}
				if dict {
					b = append(b, f.quoted[al.Provider]...)
					b = append(b, `: {"resources": {`...)
				} else {
					b = append(b, `{"resource_provider": {"uuid": `...)
					b = append(b, f.quoted[al.Provider]...)
					b = append(b, `}, "resources": {`...)
				}
			} else {
				b = append(b, ", "...)
			}
			b = append(b, f.class[al.Class]...)
			if al.Amount >= 0 && al.Amount < 10 {
				b = append(b, byte('0'+al.Amount))
			} else {
				b = strconv.AppendInt(b, al.Amount, 10)
			}
		}
		if len(allocs) > 0 {
			b = append(b, "}}"...)
		}
		if dict {
			b = append(b, '}')
		} else {
			b = append(b, ']')
		}
		if withMappings {
			b = append(b, `, "mappings": {`...)
			for k, suf := range suffixes {
				if k > 0 {
					b = append(b, ", "...)
				}
				b = append(b, suf...)
				for m, p := range res.GroupProviders(i, k) {
					if m > 0 {
						b = append(b, ", "...)
					}
					b = append(b, f.quoted[p]...)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		b = append(b, '}')
		if err := maybeFlush(); err != nil {
			return b, err
		}
	}
	b = append(b, `], "provider_summaries": {`...)
	allResources, withTraits, nested := mv.AtLeast(1, 27), mv.AtLeast(1, 17), mv.AtLeast(1, 29)
	requested := map[string]bool{}
	for _, g := range req.Groups {
		for _, rr := range g.Resources {
			requested[rr.Class] = true
		}
	}
	// From 1.29 a summary's JSON depends on the provider only: render
	// each provider once per snapshot (key included) and reuse the
	// bytes, found by the provider's index in the snapshot.
	var frags [][]byte
	if nested && res.Snapshot != nil {
		snap := res.Snapshot
		frags = snap.Memo("placement/ac-summary-json-1.29-by-index", func() any {
			m := make([][]byte, snap.ProviderCount())
			for _, s := range snap.AllSummaries() {
				f := appendJSONString(nil, s.UUID)
				f = append(f, ": "...)
				m[s.Index] = appendSummaryBody(f, s, true, true, true, nil)
			}
			return m
		}).([][]byte)
	}
	for i, s := range res.Summaries {
		if i > 0 {
			b = append(b, ", "...)
		}
		if int(s.Index) < len(frags) && frags[s.Index] != nil {
			b = append(b, frags[s.Index]...)
		} else {
			b = appendJSONString(b, s.UUID)
			b = append(b, ": "...)
			b = appendSummaryBody(b, s, allResources, withTraits, nested, requested)
		}
		if err := maybeFlush(); err != nil {
			return b, err
		}
	}
	return append(b, "}}"...), nil
}

// appendSummaryBody appends one provider summary object.
func appendSummaryBody(b []byte, s candidates.Summary, allResources, withTraits, nested bool, requested map[string]bool) []byte {
	b = append(b, `{"resources": {`...)
	n := 0
	for _, sr := range s.Resources {
		if !allResources && !requested[sr.Class] {
			continue
		}
		if n > 0 {
			b = append(b, ", "...)
		}
		n++
		b = appendJSONString(b, sr.Class)
		b = append(b, `: {"capacity": `...)
		b = strconv.AppendInt(b, sr.Capacity, 10)
		b = append(b, `, "used": `...)
		b = strconv.AppendInt(b, sr.Used, 10)
		b = append(b, '}')
	}
	b = append(b, '}')
	if withTraits {
		b = append(b, `, "traits": [`...)
		for k, t := range s.Traits {
			if k > 0 {
				b = append(b, ", "...)
			}
			b = appendJSONString(b, t)
		}
		b = append(b, ']')
	}
	if nested {
		b = append(b, `, "parent_provider_uuid": `...)
		if s.ParentUUID == "" {
			b = append(b, "null"...)
		} else {
			b = appendJSONString(b, s.ParentUUID)
		}
		b = append(b, `, "root_provider_uuid": `...)
		b = appendJSONString(b, s.RootUUID)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string (UTF-8 kept as is, as
// encoding/json does without HTML escaping).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		b = append(b, s...)
		return append(b, '"')
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
