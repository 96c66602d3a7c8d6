package candidates

import (
	"fmt"
	"math/rand/v2"
)

// Resource is an amount of one class.
type Resource struct {
	Class  string
	Amount int64
}

// Group is one request group. The unsuffixed group (Suffix "",
// UseSameProvider false) may be spread over the providers of one tree and
// sharing providers; a granular group is satisfied by one provider.
type Group struct {
	Suffix          string
	UseSameProvider bool
	Resources       []Resource // query order
	RequiredTraits  [][]string // AND of any-of sets
	ForbiddenTraits []string
	MemberOf        [][]string // AND of any-of sets of aggregate uuids
	ForbiddenAggs   []string
	InTree          string // provider uuid, "" for none
}

// Request is a whole GET /allocation_candidates query.
type Request struct {
	Groups []Group // order of first appearance in the query
	// GroupPolicy is "isolate" or anything else (none).
	GroupPolicy string
	// RootRequired / RootForbidden are root_required (1.35).
	RootRequired  []string
	RootForbidden []string
	// SameSubtrees are the same_subtree sets of suffixes (1.36).
	SameSubtrees [][]string
	// Limit caps the allocation requests returned (0 = none).
	Limit int
	// NestedAware is microversion ≥ 1.29: below it a candidate may not
	// use two providers of the same tree.
	NestedAware bool
	// MaxCandidates caps the distinct candidates generated (−1 or 0 =
	// unlimited), like [placement] max_allocation_candidates.
	MaxCandidates int
	// SearchCap bounds the work whatever MaxCandidates says (0: none):
	// at most this many candidates are generated, and at most this many
	// provider combinations are tried per group. Past it the answer holds
	// what was found and Result.Capped is set.
	SearchCap int
	// Randomize is [placement] randomize_allocation_candidates; Rand is
	// its source (nil: a fresh one).
	Randomize bool
	Rand      *rand.Rand
}

// Allocation is an amount of a class from one provider.
type Allocation struct {
	Provider string
	Class    string
	Amount   int64
}

// AllocationRequest is one candidate: allocations sorted by provider id
// then class id, and the providers satisfying each group (1.34 mappings),
// each list sorted.
type AllocationRequest struct {
	Allocations []Allocation
	// Mappings holds one entry per request group, sorted by suffix.
	Mappings []Mapping
}

// Mapping is a request group's suffix and the providers satisfying it.
type Mapping struct {
	Suffix    string
	Providers []string
}

// SummaryResource is one inventory of a provider summary.
type SummaryResource struct {
	Class    string
	Capacity int64
	Used     int64
}

// Summary describes a provider of a tree used by some candidate.
type Summary struct {
	UUID       string
	ParentUUID string // "" for a root
	RootUUID   string
	Resources  []SummaryResource // class id order
	Traits     []string          // trait id order
	// Index is the provider's position in its snapshot (0 to
	// ProviderCount()-1), for per-snapshot caches keyed by provider.
	Index int32
}

// Result is the answer to a Request. The candidates are kept compact (snapshot
// indexes, no strings) and read through Len, Allocs, Suffix and
// GroupProviders, or converted with Request/AllocationRequests; a huge
// answer (tens of thousands of candidates) is then streamed by the
// renderer without building a string per allocation. A Result is not
// safe for concurrent use.
type Result struct {
	Summaries []Summary
	// Capped reports that MaxCandidates or SearchCap stopped the
	// generation.
	Capped bool
	// SearchCapped reports that SearchCap did.
	SearchCapped bool
	// Generated is how many candidates the search produced (before
	// Limit), and Steps how many partial combinations the cross-group
	// merge walked: the search's cost, for metrics.
	Generated, Steps int
	// Snapshot is the snapshot the answer was computed on (nil for an
	// empty answer decided before any search).
	Snapshot *Snapshot

	out     []merged
	allocs  []AllocRef // out[i].aStart…: each candidate's allocations
	choices []int32    // out[i].cStart…: option index chosen per group
	plans   []*groupPlan
	order   []int // group indexes sorted by suffix
}

// AllocRef is one allocation of a candidate by snapshot indexes: see
// Snapshot.ProviderUUID and Snapshot.ClassName.
type AllocRef struct {
	Provider, Class int32
	Amount          int64
}

// UnknownClassError is upstream's ResourceClassNotFound.
type UnknownClassError struct{ Name string }

func (e *UnknownClassError) Error() string { return fmt.Sprintf("No such resource class %s.", e.Name) }

// UnknownTraitError is upstream's TraitNotFound.
type UnknownTraitError struct{ Name string }

func (e *UnknownTraitError) Error() string { return fmt.Sprintf("No such trait(s): %s.", e.Name) }
