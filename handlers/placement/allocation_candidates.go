package placement

import (
	"net/http"
	"time"

	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/pkg/placement/candidates"
)

func (a *API) registerAllocationCandidateRoutes(v func(int) microversion.Version) {
	a.route("GET", "/allocation_candidates", v(10), a.listAllocationCandidates)
}

type acResourcesJSON struct {
	Resources map[string]int64 `json:"resources"`
}

type acProviderRefJSON struct {
	UUID string `json:"uuid"`
}

type acListAllocationJSON struct {
	ResourceProvider acProviderRefJSON `json:"resource_provider"`
	Resources        map[string]int64  `json:"resources"`
}

type acCapacityJSON struct {
	Capacity int64 `json:"capacity"`
	Used     int64 `json:"used"`
}

type acSummaryJSON struct {
	Resources map[string]acCapacityJSON `json:"resources"`
	Traits    *[]string                 `json:"traits,omitempty"`
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
	return writeJSON(w, r, http.StatusOK, renderCandidates(res, req, mv), time.Time{})
}

// renderCandidates shapes the result for microversion mv.
func renderCandidates(res *candidates.Result, req *candidates.Request, mv microversion.Version) map[string]any {
	areqs := make([]map[string]any, 0, len(res.Requests))
	for _, ar := range res.Requests {
		out := map[string]any{}
		if mv.AtLeast(1, 12) {
			allocs := map[string]acResourcesJSON{}
			for _, al := range ar.Allocations {
				e, ok := allocs[al.Provider]
				if !ok {
					e = acResourcesJSON{Resources: map[string]int64{}}
					allocs[al.Provider] = e
				}
				e.Resources[al.Class] = al.Amount
			}
			out["allocations"] = allocs
			if mv.AtLeast(1, 34) {
				out["mappings"] = ar.Mappings
			}
		} else {
			var list []acListAllocationJSON
			idx := map[string]int{}
			for _, al := range ar.Allocations {
				i, ok := idx[al.Provider]
				if !ok {
					i = len(list)
					idx[al.Provider] = i
					list = append(list, acListAllocationJSON{ResourceProvider: acProviderRefJSON{al.Provider}, Resources: map[string]int64{}})
				}
				list[i].Resources[al.Class] = al.Amount
			}
			out["allocations"] = list
		}
		areqs = append(areqs, out)
	}
	requested := map[string]bool{}
	for _, g := range req.Groups {
		for _, rr := range g.Resources {
			requested[rr.Class] = true
		}
	}
	sums := make(map[string]acSummaryJSON, len(res.Summaries))
	for _, s := range res.Summaries {
		sj := acSummaryJSON{Resources: map[string]acCapacityJSON{}}
		for _, sr := range s.Resources {
			if mv.AtLeast(1, 27) || requested[sr.Class] {
				sj.Resources[sr.Class] = acCapacityJSON{sr.Capacity, sr.Used}
			}
		}
		if mv.AtLeast(1, 17) {
			traits := s.Traits
			if traits == nil {
				traits = []string{}
			}
			sj.Traits = &traits
		}
		sums[s.UUID] = sj
	}
	if mv.AtLeast(1, 29) {
		// parent_provider_uuid must render as null for roots, so these
		// summaries are maps.
		full := make(map[string]map[string]any, len(res.Summaries))
		for _, s := range res.Summaries {
			sj := sums[s.UUID]
			m := map[string]any{"resources": sj.Resources, "root_provider_uuid": s.RootUUID}
			if s.ParentUUID == "" {
				m["parent_provider_uuid"] = nil
			} else {
				m["parent_provider_uuid"] = s.ParentUUID
			}
			if sj.Traits != nil {
				m["traits"] = *sj.Traits
			}
			full[s.UUID] = m
		}
		return map[string]any{"allocation_requests": areqs, "provider_summaries": full}
	}
	return map[string]any{"allocation_requests": areqs, "provider_summaries": sums}
}
