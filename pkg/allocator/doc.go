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
//   - Best fit in time: hosts whose window sits in a hole between two
//     reservations come first, then hosts bounded on one side, then idle
//     hosts; within each class, the smaller the free time left around the
//     window, the better. This keeps long free stretches (and idle hosts)
//     open for later, longer leases.
//   - Failure domains (TagRules.LocationPrefixes, Ganeti's
//     htools:nlocation:P) spread the choice softly: each step takes the host
//     whose domains already hold the fewest chosen hosts, then the best fit.
//   - Remaining ties go to the smaller host ID (numeric order for numeric
//     IDs, as Blazar's are).
//
// The reservations are scanned once per call in input order, without
// sorting or allocating per host, split over the CPUs for large inputs;
// reasons are built in one buffer. Choosing 10 of 10,000 hosts with 100,000
// reservations takes about 2 ms on a 2-core machine (BenchmarkChooseHosts).
package allocator
