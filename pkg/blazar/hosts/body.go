package hosts

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/errs"
)

// bodyStrings turns a decoded JSON body into string values: strings as
// they are, numbers and booleans as their JSON text, null as "". Objects
// and arrays are kept as JSON text only for cpu_info.
func bodyStrings(body map[string]any) (map[string]string, error) {
	out := make(map[string]string, len(body))
	for k, v := range body {
		switch x := v.(type) {
		case string:
			out[k] = x
		case nil:
			out[k] = ""
		case bool:
			out[k] = strconv.FormatBool(x)
		case fmt.Stringer: // json.Number
			out[k] = x.String()
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		case int:
			out[k] = strconv.Itoa(x)
		case int64:
			out[k] = strconv.FormatInt(x, 10)
		case map[string]any, []any:
			if k != "cpu_info" {
				return nil, errs.BadRequestf("Malformed parameter `%s`: the value must be a string, number or boolean", k)
			}
			b, err := jsonText(x)
			if err != nil {
				return nil, errs.BadRequestf("Malformed parameter `%s`", k)
			}
			out[k] = b
		default:
			return nil, errs.BadRequestf("Malformed parameter `%s`", k)
		}
	}
	return out, nil
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// takeReservable removes the "reservable" key from caps and parses it
// (Leasehold extension: it sets the host's flag instead of becoming a
// capability that would shadow the field).
func takeReservable(caps map[string]string) (*bool, error) {
	v, ok := caps["reservable"]
	if !ok {
		return nil, nil
	}
	delete(caps, "reservable")
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return nil, errs.BadRequestf("Malformed parameter `reservable`: %q is not true or false", v)
	}
	return &b, nil
}

// maxTextBytes is the most a TEXT column holds on MySQL.
const maxTextBytes = 65535

func checkCapabilityKeys(caps map[string]string) error {
	for k, v := range caps {
		if strings.TrimSpace(k) == "" {
			return errs.BadRequestf("Extra capability keys must not be empty")
		}
		if n := utf8.RuneCountInString(k); n > MaxCapabilityKey {
			return errs.BadRequestf("Extra capability key too long: %q has %d characters, at most %d are allowed", k, n, MaxCapabilityKey)
		}
		if len(v) > maxTextBytes {
			return errs.BadRequestf("Extra capability %s is too long: %d bytes, at most %d are allowed", k, len(v), maxTextBytes)
		}
	}
	return nil
}

// checkDetails bounds the host's own fields to their column sizes.
func checkDetails(d compute.HostDetails) error {
	for _, f := range []struct {
		name, value string
		max         int
	}{
		{"service_name", d.ServiceName, 255}, {"hypervisor_type", d.HypervisorType, 255},
		{"availability_zone", d.AvailabilityZone, 255}, {"cpu_info", d.CPUInfo, maxTextBytes},
	} {
		if len(f.value) > f.max {
			return errs.BadRequestf("Malformed parameter `%s`: %d bytes, at most %d are allowed", f.name, len(f.value), f.max)
		}
	}
	return nil
}
