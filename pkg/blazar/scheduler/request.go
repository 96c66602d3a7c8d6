package scheduler

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/pkg/errs"
)

// Request is one scheduling decision asked for: who boots, which
// reservation the boot names (by hint, by flavor, or neither), and the
// candidate hosts by name.
type Request struct {
	ProjectID string
	UserID    string
	// Reservation is the scheduler hint reservation=<id> ("" without).
	Reservation string
	// FlavorReservation is the reservation an instance-reservation
	// flavor names: resources[N]:CUSTOM_RESERVATION_<ID>=<n ≥ 1>, or
	// upstream's aggregate_instance_extra_specs:reservation=<id> ("" for
	// an ordinary flavor).
	FlavorReservation string
	// Explain asks, for a boot naming no reservation, which lease holds
	// each registered candidate now (a read per candidate); without it
	// such a host's reason only says it is Leasehold's.
	Explain bool
	// Hosts are the candidates' names: Nova's nodename (the hypervisor
	// hostname Leasehold registers hosts by), or the compute service's
	// host name.
	Hosts []string
}

// ReservationClassPrefix starts the Placement resource class of an
// instance reservation: CUSTOM_RESERVATION_ + the reservation id in upper
// case with "-" turned into "_".
const ReservationClassPrefix = "CUSTOM_RESERVATION_"

// upstreamFlavorKey is the extra spec upstream Blazar puts on an
// instance reservation's flavor.
const upstreamFlavorKey = "aggregate_instance_extra_specs:reservation"

// maxHosts bounds the candidates of one request (Nova sends every
// enabled compute host; the body limit bounds it anyway).
const maxHosts = 100000

// ParseRequest reads a filter request body:
//
//	{"project_id": "…", "user_id": "…",
//	 "scheduler_hints": {"reservation": "<id>" | ["<id>"], …},
//	 "flavor": {"extra_specs": {"resources:CUSTOM_RESERVATION_…": "1", …},
//	            "resources": {"CUSTOM_RESERVATION_…": 1, …}},
//	 "hosts": ["compute1", …], "explain": false}
//
// project_id and hosts are required; keys it does not know are ignored,
// so a newer filter can send more than this server reads. A value of the
// wrong type, two different reservations named in the hint or in the
// flavor, or an empty host name is a BadRequest.
func ParseRequest(body map[string]any) (Request, error) {
	var req Request
	var err error
	if req.ProjectID, err = str(body, "project_id", true); err != nil {
		return req, err
	}
	if req.UserID, err = str(body, "user_id", false); err != nil {
		return req, err
	}
	if req.Reservation, err = hintReservation(body["scheduler_hints"]); err != nil {
		return req, err
	}
	if req.FlavorReservation, err = flavorReservation(body["flavor"]); err != nil {
		return req, err
	}
	switch v := body["explain"].(type) {
	case nil:
	case bool:
		req.Explain = v
	default:
		return req, errs.BadRequestf("Malformed parameter `explain`: true or false is expected.")
	}
	raw, ok := body["hosts"]
	if !ok || raw == nil {
		return req, errs.BadRequestf("Missing parameter `hosts`: the list of candidate host names.")
	}
	list, ok := raw.([]any)
	if !ok {
		return req, errs.BadRequestf("Malformed parameter `hosts`: a list of host names is expected.")
	}
	if len(list) > maxHosts {
		return req, errs.BadRequestf("Too many hosts: %d given, at most %d per request.", len(list), maxHosts)
	}
	req.Hosts = make([]string, len(list))
	for i, v := range list {
		name, ok := v.(string)
		if !ok || name == "" {
			return req, errs.BadRequestf("Malformed parameter `hosts`: item %d is not a host name.", i)
		}
		req.Hosts[i] = name
	}
	return req, nil
}

// str reads a string field; null counts as absent.
func str(body map[string]any, key string, required bool) (string, error) {
	v := body[key]
	if v == nil {
		if required {
			return "", errs.BadRequestf("Missing parameter `%s`.", key)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", errs.BadRequestf("Malformed parameter `%s`: a string is expected.", key)
	}
	if required && s == "" {
		return "", errs.BadRequestf("Missing parameter `%s`.", key)
	}
	return s, nil
}

// hintReservation reads scheduler_hints.reservation: a string, or a list
// of strings as Nova keeps every hint. Repeating one id is fine; two
// different ids are refused rather than guessed between.
func hintReservation(raw any) (string, error) {
	if raw == nil {
		return "", nil
	}
	hints, ok := raw.(map[string]any)
	if !ok {
		return "", errs.BadRequestf("Malformed parameter `scheduler_hints`: an object is expected.")
	}
	var ids []string
	switch v := hints["reservation"].(type) {
	case nil:
		return "", nil
	case string:
		ids = []string{v}
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return "", errs.BadRequestf("Malformed scheduler hint `reservation`: a reservation id is expected.")
			}
			ids = append(ids, s)
		}
	default:
		return "", errs.BadRequestf("Malformed scheduler hint `reservation`: a reservation id is expected.")
	}
	return oneID(ids, "scheduler hint `reservation`")
}

// flavorReservation finds the reservation an instance-reservation flavor
// names in extra_specs or resources.
func flavorReservation(raw any) (string, error) {
	if raw == nil {
		return "", nil
	}
	flavor, ok := raw.(map[string]any)
	if !ok {
		return "", errs.BadRequestf("Malformed parameter `flavor`: an object is expected.")
	}
	var ids []string
	if specs := flavor["extra_specs"]; specs != nil {
		m, ok := specs.(map[string]any)
		if !ok {
			return "", errs.BadRequestf("Malformed parameter `flavor.extra_specs`: an object is expected.")
		}
		for k, v := range m {
			if k == upstreamFlavorKey {
				s, ok := v.(string)
				if !ok || s == "" {
					return "", errs.BadRequestf("Malformed extra spec `%s`: a reservation id is expected.", k)
				}
				ids = append(ids, s)
				continue
			}
			class, ok := resourceKey(k)
			if !ok || !strings.HasPrefix(class, ReservationClassPrefix) {
				continue
			}
			n, err := amount(v)
			if err != nil {
				return "", errs.BadRequestf("Malformed extra spec `%s`: %s", k, err)
			}
			if n > 0 {
				ids = append(ids, ReservationOfClass(class))
			}
		}
	}
	if res := flavor["resources"]; res != nil {
		m, ok := res.(map[string]any)
		if !ok {
			return "", errs.BadRequestf("Malformed parameter `flavor.resources`: an object of resource class amounts is expected.")
		}
		for class, v := range m {
			if !strings.HasPrefix(class, ReservationClassPrefix) {
				continue
			}
			n, err := amount(v)
			if err != nil {
				return "", errs.BadRequestf("Malformed resource amount `%s`: %s", class, err)
			}
			if n > 0 {
				ids = append(ids, ReservationOfClass(class))
			}
		}
	}
	return oneID(ids, "flavor's reservation")
}

// resourceKey returns the resource class of a flavor extra spec
// "resources:CLASS" or a granular "resources<suffix>:CLASS".
func resourceKey(k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, "resources")
	if !ok {
		return "", false
	}
	_, class, ok := strings.Cut(rest, ":")
	return class, ok && class != ""
}

// amount reads a resource amount: an integer, or its decimal text (extra
// specs are strings).
func amount(v any) (int64, error) {
	var text string
	switch x := v.(type) {
	case string:
		text = strings.TrimSpace(x)
	case json.Number:
		text = x.String()
	case float64:
		text = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return 0, fmt.Errorf("an integer is expected")
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("a non-negative integer is expected, got %q", text)
	}
	return n, nil
}

// oneID returns the one distinct id of ids ("" for none).
func oneID(ids []string, what string) (string, error) {
	id := ""
	for _, x := range ids {
		if x == "" {
			return "", errs.BadRequestf("Malformed %s: an empty reservation id.", what)
		}
		if id != "" && x != id {
			return "", errs.BadRequestf("The %s names two reservations (%s and %s); one is expected.", what, id, x)
		}
		id = x
	}
	return id, nil
}

// ClassOfReservation is the Placement resource class of an instance
// reservation: CUSTOM_RESERVATION_ + upper(id) with "-" → "_".
func ClassOfReservation(id string) string {
	return ReservationClassPrefix + strings.ToUpper(strings.ReplaceAll(id, "-", "_"))
}

// ReservationOfClass inverts ClassOfReservation for the ids Leasehold
// makes (lower-case UUIDs): lower case, "_" → "-".
func ReservationOfClass(class string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(class, ReservationClassPrefix), "_", "-"))
}
