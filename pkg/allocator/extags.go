package allocator

// Exclusion tags on leases. Ganeti keeps two instances sharing an
// exclusion tag (cluster tag htools:iextags:P, instance tags starting
// with P) off one node, and its cluster metric counts the (failure
// domain, exclusion tag) pairs held by two or more such instances
// (seed ganeti-location-awareness), so the instances also spread over
// failure domains, softly. For whole-host reservations the first rule
// holds by construction: a host is never booked by two leases whose
// windows overlap. What exclusion tags add is the second: a lease whose
// tags share an exclusion tag with another lease overlapping it in time
// prefers hosts outside the failure domains that lease's hosts are in.

// TaggedBooking is one host booked by another lease over Window; Tags are
// that lease's tags.
type TaggedBooking struct {
	HostID string
	Window Interval
	Tags   []string
}

// ExclusionHosts returns the hosts (sorted, unique) booked by leases that
// overlap win and share an exclusion tag with tags. Nil rules, no
// exclusion prefixes or no exclusion tag among tags give nil.
func (r *TagRules) ExclusionHosts(tags []string, win Interval, books []TaggedBooking) []string {
	mine := r.ExclusionTags(tags)
	if len(mine) == 0 {
		return nil
	}
	var out []string
	for _, b := range books {
		if !b.Window.Start.Before(win.End) || !win.Start.Before(b.Window.End) {
			continue
		}
		if shareTag(mine, r.ExclusionTags(b.Tags)) {
			out = append(out, b.HostID)
		}
	}
	return sortedUnique(out)
}

// WithExclusion returns req with the failure domains of the hosts
// ExclusionHosts names added to UsedDomains (one entry per host, as the
// spread counts them), so the choice prefers other domains; domainsOf
// gives the failure-domain tags of host ids (as HostRequest.UsedDomains
// wants them).
func (r *TagRules) WithExclusion(req HostRequest, tags []string, books []TaggedBooking, domainsOf func(ids []string) []string) HostRequest {
	hosts := r.ExclusionHosts(tags, req.Window, books)
	if len(hosts) == 0 || domainsOf == nil {
		return req
	}
	extra := domainsOf(hosts)
	if len(extra) == 0 {
		return req
	}
	req.UsedDomains = append(append([]string(nil), req.UsedDomains...), extra...)
	return req
}

func shareTag(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

// LocationDomainsOf returns a domainsOf function for WithExclusion over
// hosts: each named host's failure-domain tags under r.
func (r *TagRules) LocationDomainsOf(hosts []Host) func(ids []string) []string {
	return func(ids []string) []string {
		var out []string
		for _, id := range ids {
			for i := range hosts {
				if hosts[i].ID == id {
					out = append(out, r.LocationTags(hosts[i].Tags)...)
				}
			}
		}
		return out
	}
}
