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
	})
	if err != nil {
		return err
	}
	bp, _ := renderBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	body := appendCandidates((*bp)[:0], res, req, mv)
	if mv.AtLeast(1, 15) {
		setCacheHeaders(w, time.Time{})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(body)
	// Write does not keep body (io.Writer): reuse it, unless it is
	// outsized (one huge answer should not pin its memory for good).
	if cap(body) <= maxPooledRender {
		*bp = body
		renderBufs.Put(bp)
	}
	return err
}

// renderBufs recycles answer buffers: a few hundred KB per request
// otherwise, allocated, zeroed and collected each time.
var renderBufs sync.Pool

const maxPooledRender = 4 << 20

// renderCandidates encodes the result for microversion mv into a new
// buffer.
func renderCandidates(res *candidates.Result, req *candidates.Request, mv microversion.Version) []byte {
	return appendCandidates(nil, res, req, mv)
}

// appendCandidates appends the result encoded for microversion mv to b.
// It writes the JSON by hand: a big answer (thousands of candidates and
// summaries) is encoded several times faster than through maps and
// encoding/json.
func appendCandidates(b []byte, res *candidates.Result, req *candidates.Request, mv microversion.Version) []byte {
	if need := 256 + len(res.Requests)*448 + len(res.Summaries)*320; cap(b)-len(b) < need {
		b = append(make([]byte, 0, len(b)+need), b...)
	}
	b = append(b, `{"allocation_requests": [`...)
	dict, withMappings := mv.AtLeast(1, 12), mv.AtLeast(1, 34)
	for i, ar := range res.Requests {
		if i > 0 {
			b = append(b, ", "...)
		}
		if dict {
			b = append(b, `{"allocations": {`...)
		} else {
			b = append(b, `{"allocations": [`...)
		}
		for j, al := range ar.Allocations {
			first := j == 0 || ar.Allocations[j-1].Provider != al.Provider
			if first {
				if j > 0 {
					b = append(b, "}}, "...)
				}
				if dict {
					b = appendJSONString(b, al.Provider)
					b = append(b, `: {"resources": {`...)
				} else {
					b = append(b, `{"resource_provider": {"uuid": `...)
					b = appendJSONString(b, al.Provider)
					b = append(b, `}, "resources": {`...)
				}
			} else {
				b = append(b, ", "...)
			}
			b = appendJSONString(b, al.Class)
			b = append(b, ": "...)
			b = strconv.AppendInt(b, al.Amount, 10)
		}
		if len(ar.Allocations) > 0 {
			b = append(b, "}}"...)
		}
		if dict {
			b = append(b, '}')
		} else {
			b = append(b, ']')
		}
		if withMappings {
			b = append(b, `, "mappings": {`...)
			for k, mp := range ar.Mappings { // sorted by suffix
				if k > 0 {
					b = append(b, ", "...)
				}
				b = appendJSONString(b, mp.Suffix)
				b = append(b, ": ["...)
				for m, u := range mp.Providers {
					if m > 0 {
						b = append(b, ", "...)
					}
					b = appendJSONString(b, u)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		b = append(b, '}')
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
			continue
		}
		b = appendJSONString(b, s.UUID)
		b = append(b, ": "...)
		b = appendSummaryBody(b, s, allResources, withTraits, nested, requested)
	}
	return append(b, "}}"...)
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
