package placement

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/leasehold/leasehold/pkg/microversion"
)

// decodeBody reads a JSON body under Placement's content rules, validates
// it against schema and decodes it into dst. It also returns the top-level
// members, so callers can tell an absent key from a null one.
func decodeBody(r *http.Request, schema string, dst any) (map[string]json.RawMessage, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if err := validateJSON(body, schema); err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(body, &raw) // may be a non-object; schema decided
	if dst != nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(dst); err != nil {
			return nil, errStatus(http.StatusBadRequest, "JSON does not validate: "+err.Error())
		}
	}
	return raw, nil
}

// validateJSON checks body is JSON and matches schema.
func validateJSON(body []byte, schema string) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return errStatus(http.StatusBadRequest, "Malformed JSON: "+err.Error())
	}
	return nil
}

const uuidSchema = `{"type": "string", "format": "uuid"}`

func schemaCreateProvider(mv microversion.Version) string {
	if mv.AtLeast(1, 14) {
		return `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 200},
 "uuid": {"type": "string", "format": "uuid"},
 "parent_provider_uuid": {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]}},
 "required": ["name"], "additionalProperties": false}`
	}
	return `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 200},
 "uuid": {"type": "string", "format": "uuid"}}, "required": ["name"], "additionalProperties": false}`
}

func schemaUpdateProvider(mv microversion.Version) string {
	if mv.AtLeast(1, 14) {
		return `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 200},
 "parent_provider_uuid": {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]}},
 "required": ["name"], "additionalProperties": false}`
	}
	return `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 200}},
 "required": ["name"], "additionalProperties": false}`
}
