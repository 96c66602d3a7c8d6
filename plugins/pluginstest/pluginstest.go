// Package pluginstest holds helpers for the reservation plugins' tests.
package pluginstest

import (
	"bytes"
	"encoding/json"

	"github.com/leasehold/leasehold/plugins"
)

// JSONObject decodes s as the API decodes a reservation (numbers kept as
// json.Number); ok is false for anything but a JSON object.
func JSONObject(s string) (v plugins.Values, ok bool) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil || m == nil {
		return nil, false
	}
	return m, true
}
