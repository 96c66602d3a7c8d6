// Package allocator is Leasehold's placement engine: pure Go, no database,
// no HTTP and no clock (time comes in as an argument), and deterministic
// (the same input always gives the same output).
//
// It has two faces.
//
// # Ganeti-compatible instance allocation
//
// The model follows Ganeti's htools (hail 3.0.2) closely enough that its
// answers equal hail's on identical input: nodes with capacity, reserved
// amounts, tags and group membership; instances with a primary and an
// optional secondary; groups with an instance policy (a list of min/max
// spec intervals) and a dedicated flag (Ganeti's exclusive_storage); and
// cluster tag rules (failure-domain, exclusion and migration prefixes).
// Package iallocator reads and writes Ganeti's IAllocator JSON on top of it.
//
// Entry points: NewCluster builds the model (derived figures as htools
// computes them at load time); Cluster.Allocate and MultiAllocate place new
// instances; Relocate, NodeEvacuate and ChangeGroup plan moves. Every
// rejected candidate is counted under a FailMode (FailMem, FailDisk,
// FailCPU, FailN1, FailTags, FailMig, FailDiskCount, FailSpindles), per
// group, in AllocResult.Solutions; FailMode.Reason words it for users.
//
// Feasibility is hail's, strict: memory and disk must stay above zero
// after placement; the vCPU ratio and the spindle budget are upper bounds;
// a node must not become N+1-failing (its free memory must stay above the
// memory it reserves for failovers of DRBD primaries it is secondary for);
// an instance's exclusion tags must not already be on the node's
// primaries; the instance must fit one of the policy's intervals.
//
// Scoring. In a dedicated group (every node with exclusive storage) the
// metric is the pair (lost-allocations vector, free disk after),
// lexicographic; the vector counts, per policy interval (largest min disk
// first), how many minimal instances of that interval the node loses. In
// other groups it is htools' cluster metric: twenty weighted components
// (standard deviations of free memory, disk, reserved memory, vCPU ratio,
// load and spindles, N+1 and offline counts, exclusion-tag conflicts, the
// two location components and the reserved-memory total). Statistics are
// kept as (count, sum, variance) and updated with htools' own incremental
// formulas, so a candidate costs O(1) and its score is bit-identical to
// hail's; only near-ties of single-node placements are re-summed from
// scratch (bounded by Options.ExactTieBudget) because hail recomputes
// those from scratch. The global N+1 check (on unless
// Options.NoCapacityChecks) evacuates every node of the resulting cluster
// (DRBD failovers honouring migration tags, shared-storage moves,
// re-creation of the rest); nodes the placement cannot affect reuse a
// check made once before the candidates are scored.
//
// Ties break as in hail: the later candidate in node order (JSON order),
// for pairs the later primary and then its later secondary, and the later
// group. hail's few quirks are reproduced on purpose and marked in the
// code (instance-index reuse in group-scoped N+1 checks, node lists
// narrowed after multi-group dedicated allocations).
//
// # Blazar host reservations
//
// ChooseHosts picks whole hosts for a reservation window:
//
//   - A host is a candidate if the caller's Match accepts it and none of its
//     reservations overlaps [Start-Cleaning, End+Cleaning). Every other host
//     is listed in HostDecision.Rejected with a reason (the failed property,
//     or the earliest conflicting reservation).
//   - Between Min and Max hosts are chosen, as many as possible (Blazar's
//     semantics). Fewer than Min free hosts is a *NotEnoughHostsError that
//     carries the decision and explains the shortfall.
//   - Fewest big fits lost first (SizeRanks): the hosts' (memory, vCPUs,
//     disk) profiles are size classes, largest first; a host loses a fit
//     of every class it can hold, and the host whose loss vector is
//     lexicographically smallest comes first. A request that small hosts
//     match goes to them while they are free, keeping the big hosts for
//     the requests only they can serve (Ganeti's lost-allocations metric
//     of partitioned allocation, applied to whole hosts).
//   - A reserve of bigger hosts (HostRequest.ReservePercent, trunk
//     reservation): the hosts of a size rank above the best one among the
//     matching hosts are the bigger ones; that share of them (rounded
//     down) stays free, the worst of the free ones by the rules here held
//     back (HostDecision.Held), so a small request takes a big host only
//     while more than the reserve are free. When small hosts are all busy,
//     the fit in time on a big host cannot save the big requests' room:
//     the window takes it whichever big host it goes to.
//   - Then the fit in time, by the fits the window loses there: in a free
//     interval unbounded on a side it loses none (what is left stays
//     unbounded), in a hole between two reservations it loses the fits the
//     hole held. Hosts bounded on one side come first (the window extends
//     a booked stretch), then idle hosts, then holes; within each class,
//     the smaller the free time left around the window, the better.
//   - Failure domains (TagRules.LocationPrefixes, Ganeti's
//     htools:nlocation:P) spread the choice softly: each step takes the host
//     whose domains already hold the fewest chosen hosts (counting
//     HostRequest.UsedDomains: hosts the lease or reservation already
//     holds), then the best host by the rules above. A min=max=N request
//     spans N domains whenever N domains have a free matching host.
//   - Remaining ties go to the smaller host ID (numeric order for numeric
//     IDs, as Blazar's are).
//
// Instance slots (ChooseSlots, EarliestSlots) pack onto hosts already in
// use over the window before fresh ones, then by the lost-allocations
// metric over the policy's slot sizes; a whole-host reserve
// (SlotRequest.WholeReservePercent, slots_reserve.go) keeps a share of
// the matching hosts entirely free for requests of whole-host size, and
// both functions count it the same way, so a window EarliestSlots offers
// is one ChooseSlots accepts.
//
// The reservations are scanned once per call in input order, without
// sorting or allocating per host, split over the CPUs for large inputs;
// reasons are built in one buffer. Choosing 10 of 10,000 hosts with 100,000
// reservations takes about 2 ms on a 2-core machine (BenchmarkChooseHosts).
package allocator
