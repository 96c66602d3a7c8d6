package instance

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/pkg/allocator"
	"github.com/leasehold/leasehold/plugins"
)

// demand is what one instance of a reservation asks Placement for, as
// Nova's scheduler builds the request from the reservation's flavor:
// amounts by resource class, and the traits the compute node provider
// must have (required) or lack (forbidden).
type demand struct {
	amounts             map[string]int64 // no zero amounts
	required, forbidden []string         // sorted
	// fromPolicy: PCPU comes from hw:cpu_policy=dedicated.
	fromPolicy bool
}

// sizeDemand is the demand of a flavor of size s without extra specs.
func sizeDemand(s allocator.SlotSize) demand {
	d := demand{amounts: map[string]int64{}}
	for class, n := range map[string]int64{"VCPU": s.VCPUs, "MEMORY_MB": s.MemoryMB, "DISK_GB": s.DiskGB} {
		if n > 0 {
			d.amounts[class] = n
		}
	}
	return d
}

// customClasses are d's classes other than the four standard ones the
// plugin counts, sorted.
func (d *demand) customClasses() []string {
	var out []string
	for c := range d.amounts {
		if !countedStandard[c] {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// plain reports whether d asks for no more than VCPU, MEMORY_MB and
// DISK_GB, with no trait.
func (d *demand) plain() bool {
	for c := range d.amounts {
		if c != "VCPU" && c != "MEMORY_MB" && c != "DISK_GB" {
			return false
		}
	}
	return len(d.required) == 0 && len(d.forbidden) == 0
}

// hostOK reports whether a compute node provider with traits satisfies
// d's trait constraints.
func (d *demand) hostOK(traits map[string]bool) bool {
	for _, t := range d.required {
		if !traits[t] {
			return false
		}
	}
	for _, t := range d.forbidden {
		if traits[t] {
			return false
		}
	}
	return true
}

// countedStandard are the standard classes counted on the compute node
// provider; any other standard class is refused (its inventory lives on
// nested providers: VGPU, SRIOV_NET_VF, NET_BW_*, …, or is not counted).
var countedStandard = map[string]bool{"VCPU": true, "PCPU": true, "MEMORY_MB": true, "DISK_GB": true}

var (
	// granular are the numbered or suffixed request groups
	// (resources1:, trait_foo:, …): Nova may satisfy them from other
	// providers of the tree.
	granular = regexp.MustCompile(`^(resources|trait|required|member_of)[0-9A-Za-z_-]+:`)
	// classRE and traitRE are Placement's custom class and trait name
	// syntax (standard names are upper case with underscores too).
	nameRE = regexp.MustCompile(`^[A-Z0-9_]+$`)
)

// refusedHW are the hw: specs whose NUMA, pinning or device topologies
// the slots cannot count: Nova would place or size servers in ways the
// reservation never reserved.
var refusedHW = []string{
	"hw:numa_", "hw:mem_page_size", "hw:cpu_dedicated_mask", "hw:cpu_realtime", "hw:emulator_threads_policy",
	"hw:pmem", "hw:mem_encryption", "hw:pci_numa_affinity_policy", "hw:vpmem",
}

// refusedPrefixes are other specs that make Nova request resources from
// other providers (PCI devices, accelerators).
var refusedPrefixes = []string{"pci_passthrough:", "accel:"}

// specError is the 400 of a spec the reservation cannot honour.
func specError(flavorID, key, value, why string) error {
	return plugins.BadRequest("Flavor %s has the extra spec %s=%s, which a %s reservation cannot honour: %s.",
		flavorID, key, value, FlavorResourceType, why)
}

// flavorDemand is the demand of a reservation copying flavor fl: the
// amounts and traits Nova's scheduler requests for a flavor of fl's
// size with fl's extra specs (the reservation's private flavor), or a
// 400 naming the first spec that cannot be honoured safely.
//
//   - VCPU = vcpus, MEMORY_MB = ram, DISK_GB = disk + ephemeral;
//   - hw:cpu_policy=dedicated moves the vcpus to PCPU (and
//     hw:cpu_thread_policy=isolate/require forbids/requires the trait
//     HW_CPU_HYPERTHREADING, as Nova does); mixed is refused;
//   - resources:<CLASS>=<n> sets the amount of CLASS (0 drops it), for
//     VCPU, PCPU, MEMORY_MB, DISK_GB and CUSTOM_* classes;
//   - trait:<NAME>=required|forbidden (other values are ignored, as
//     Nova ignores them).
func flavorDemand(fl Flavor) (demand, error) {
	d := sizeDemand(allocator.SlotSize{VCPUs: fl.VCPUs, MemoryMB: fl.RAM, DiskGB: fl.Disk + fl.Ephemeral})
	specs := fl.ExtraSpecs
	keys := slices.Sorted(maps.Keys(specs))
	explicitCPU := false
	for _, k := range keys {
		v := specs[k]
		for _, p := range refusedHW {
			if strings.HasPrefix(k, p) {
				return demand{}, specError(fl.ID, k, v, "NUMA, pinning and device topologies are not counted by the reservation's slots")
			}
		}
		for _, p := range refusedPrefixes {
			if strings.HasPrefix(k, p) {
				return demand{}, specError(fl.ID, k, v, "the devices it asks for are not counted by the reservation's slots")
			}
		}
		if granular.MatchString(k) {
			return demand{}, specError(fl.ID, k, v, "granular request groups may be satisfied by other providers than the compute node")
		}
		switch {
		case strings.HasPrefix(k, "resources:"):
			class := strings.TrimPrefix(k, "resources:")
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < 0 {
				return demand{}, specError(fl.ID, k, v, "the amount is not a non-negative integer")
			}
			if !nameRE.MatchString(class) {
				return demand{}, specError(fl.ID, k, v, "the resource class name is malformed")
			}
			switch {
			case strings.HasPrefix(class, "CUSTOM_RESERVATION_"):
				return demand{}, specError(fl.ID, k, v, "it is another reservation's class")
			case strings.HasPrefix(class, "CUSTOM_"), countedStandard[class]:
			default:
				return demand{}, specError(fl.ID, k, v, "only VCPU, PCPU, MEMORY_MB, DISK_GB and CUSTOM_* classes of the compute node are counted")
			}
			if class == "VCPU" || class == "PCPU" {
				explicitCPU = true
			}
			if n == 0 {
				delete(d.amounts, class)
			} else {
				d.amounts[class] = n
			}
		case strings.HasPrefix(k, "trait:"):
			name := strings.TrimPrefix(k, "trait:")
			if !nameRE.MatchString(name) {
				return demand{}, specError(fl.ID, k, v, "the trait name is malformed")
			}
			switch v {
			case "required":
				d.required = append(d.required, name)
			case "forbidden":
				d.forbidden = append(d.forbidden, name)
			}
		}
	}
	switch policy := specs["hw:cpu_policy"]; policy {
	case "", "shared":
	case "dedicated":
		if explicitCPU {
			return demand{}, specError(fl.ID, "hw:cpu_policy", policy, "it cannot be combined with resources:VCPU or resources:PCPU")
		}
		delete(d.amounts, "VCPU")
		if fl.VCPUs > 0 {
			d.amounts["PCPU"], d.fromPolicy = fl.VCPUs, true
		}
		switch tp := specs["hw:cpu_thread_policy"]; tp {
		case "isolate":
			d.forbidden = append(d.forbidden, "HW_CPU_HYPERTHREADING")
		case "require":
			d.required = append(d.required, "HW_CPU_HYPERTHREADING")
		case "", "prefer":
		default:
			return demand{}, specError(fl.ID, "hw:cpu_thread_policy", tp, "it is not one of prefer, isolate and require")
		}
	default:
		return demand{}, specError(fl.ID, "hw:cpu_policy", policy, "only shared and dedicated CPU policies are counted")
	}
	slices.Sort(d.required)
	d.required = slices.Compact(d.required)
	slices.Sort(d.forbidden)
	d.forbidden = slices.Compact(d.forbidden)
	for _, t := range d.required {
		if slices.Contains(d.forbidden, t) {
			return demand{}, specError(fl.ID, "trait:"+t, specs["trait:"+t], "the trait is both required and forbidden")
		}
	}
	if len(d.amounts) == 0 {
		return demand{}, plugins.BadRequest("Flavor %s asks for no resources: it cannot size a %s reservation.", fl.ID, FlavorResourceType)
	}
	if n := len(d.customClasses()); n > allocator.MaxCustomClasses {
		return demand{}, plugins.BadRequest("Flavor %s asks for %d custom resource classes: a %s reservation counts at most %d.",
			fl.ID, n, FlavorResourceType, allocator.MaxCustomClasses)
	}
	return d, nil
}

// dims map demands onto the allocator's dimensions for one choice: the
// standard classes, then the request's custom classes in order (classes
// the request does not use are left out: they cannot limit it).
type dims struct {
	custom []string
}

func dimsOf(d *demand) dims { return dims{custom: d.customClasses()} }

// size is demand d projected on the dimensions.
func (m dims) size(d *demand) allocator.SlotSize {
	s := allocator.SlotSize{VCPUs: d.amounts["VCPU"], PCPUs: d.amounts["PCPU"], MemoryMB: d.amounts["MEMORY_MB"], DiskGB: d.amounts["DISK_GB"]}
	for i, c := range m.custom {
		s.Custom[i] = d.amounts[c]
	}
	return s
}

// storedDemand is the demand of a stored reservation of size s copying
// the flavor whose JSON is source ("" for virtual:instance). A stored
// flavor passed flavorDemand when the reservation was made; should it no
// longer read, its plain size is counted.
func storedDemand(s allocator.SlotSize, source string) demand {
	if source == "" {
		return sizeDemand(s)
	}
	var fl Flavor
	if err := json.Unmarshal([]byte(source), &fl); err != nil {
		return sizeDemand(s)
	}
	d, err := flavorDemand(fl)
	if err != nil {
		return sizeDemand(s)
	}
	return d
}

// want is a reservation's demand on the dimensions of its choice.
type want struct {
	d    demand
	m    dims
	size allocator.SlotSize
	// units are d's amounts as a list (checked against max_units for
	// every host: no map iteration there).
	units []classAmount
}

type classAmount struct {
	class string
	n     int64
}

// wantOf is the demand of parameters ps.
func wantOf(ps *params) *want {
	d := sizeDemand(ps.size)
	if ps.flavor != nil {
		d = *ps.flavor
	}
	m := dimsOf(&d)
	w := &want{d: d, m: m, size: m.size(&d)}
	for _, c := range slices.Sorted(maps.Keys(d.amounts)) {
		w.units = append(w.units, classAmount{c, d.amounts[c]})
	}
	return w
}

// request is the allocator request of w for ps.
func (w *want) request(ps *params) allocator.SlotRequest {
	return allocator.SlotRequest{Size: w.size, Amount: ps.amount, Affinity: ps.affinity, CustomNames: w.m.custom}
}

// unservedError is a class of the demand that no matching host's
// compute node provider has an inventory of: a 400 rather than "not
// enough", since the slots could never be counted (an inventory of a
// nested or sharing provider is not).
type unservedError struct {
	class, spec string
	hosts       int
}

func (e *unservedError) Error() string {
	return fmt.Sprintf("The flavor asks for %s (%s), but none of the %d matching hosts has an inventory of %s on its compute node resource provider; inventories of nested or sharing providers are not counted.",
		e.class, e.spec, e.hosts, e.class)
}

// served checks that the matching hosts (n of them) offer, together
// (offered: the per-dimension maximum of their capacities), every
// PCPU or custom class w asks for.
func (w *want) served(offered allocator.SlotSize, n int) error {
	if n == 0 {
		return nil
	}
	if w.size.PCPUs > 0 && offered.PCPUs == 0 {
		spec := "resources:PCPU"
		if w.d.amounts["PCPU"] > 0 && w.d.fromPolicy {
			spec = "hw:cpu_policy=dedicated"
		}
		return &unservedError{class: "PCPU", spec: spec, hosts: n}
	}
	for i, c := range w.m.custom {
		if w.size.Custom[i] > 0 && offered.Custom[i] == 0 {
			return &unservedError{class: c, spec: "resources:" + c, hosts: n}
		}
	}
	return nil
}

// checkExternal refuses, with an external Placement, a demand beyond
// VCPU, MEMORY_MB and DISK_GB: only the built-in Placement's PCPU and
// custom inventories and traits are read.
func (p *Plugin) checkExternal(ps *params) error {
	if p.cfg.External == nil || ps.flavor == nil || ps.flavor.plain() {
		return nil
	}
	return plugins.BadRequest("The flavor's extra specs ask for PCPU, custom resource classes or traits, which Leasehold counts only with its built-in Placement (an external Placement is configured).")
}
