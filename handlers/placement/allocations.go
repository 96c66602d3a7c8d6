package placement

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"

	"github.com/go-chi/chi/v5"

	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
)

func (a *API) registerAllocationRoutes(v func(int) microversion.Version) {
	a.route("POST", "/allocations", v(13), a.postAllocations)
	a.route("GET", "/allocations/{consumer_uuid}", v(0), a.getAllocations)
	a.route("PUT", "/allocations/{consumer_uuid}", v(0), a.putAllocations)
	a.route("DELETE", "/allocations/{consumer_uuid}", v(0), a.deleteAllocations)
	a.route("GET", "/resource_providers/{uuid}/allocations", v(0), a.getProviderAllocations)
}

// Allocation schemas, per microversion, with upstream's key order (the
// validator reports errors in that order).
const (
	schemaRCPattern    = `^[A-Z0-9_]+$`
	schemaUUIDPattern  = `^[0-9a-fA-F-]{36}$`
	schemaResources    = `{"type": "object", "minProperties": 1, "patternProperties": {"` + schemaRCPattern + `": {"type": "integer", "minimum": 1}}, "additionalProperties": false}`
	schemaOwnerID      = `{"type": "string", "minLength": 1, "maxLength": 255}`
	schemaConsumerGen  = `{"type": ["integer", "null"], "additionalProperties": false}`
	schemaConsumerType = `{"type": "string", "pattern": "` + schemaRCPattern + `", "minLength": 1, "maxLength": 255}`
	schemaMappings     = `{"type": "object", "minProperties": 1, "patternProperties": {"[a-zA-Z0-9_-]{1,64}": {"type": "array", "minItems": 1, "items": {"type": "string", "format": "uuid"}}}}`

	// schemaAllocationList is PUT /allocations/{c} before 1.12 (list form);
	// %s adds the 1.8 properties, %s the 1.8 required names.
	schemaAllocationList = `{"type": "object", "properties": {"allocations": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {` +
		`"resource_provider": {"type": "object", "properties": {"uuid": {"type": "string", "format": "uuid"}}, "additionalProperties": false, "required": ["uuid"]}, ` +
		`"resources": ` + schemaResources + `}, "required": ["resource_provider", "resources"], "additionalProperties": false}}%s}, ` +
		`"required": ["allocations"%s], "additionalProperties": false}`
)

// schemaAllocationDict is the dict form (1.12+): minProps is the
// allocations minProperties (0 where allocations may be emptied), extra
// are the properties after user_id and required the names after user_id.
func schemaAllocationDict(minProps int, extra []string, required []string) string {
	props := ""
	for _, e := range extra {
		props += ", " + e
	}
	req := ""
	for _, n := range required {
		req += `, "` + n + `"`
	}
	return `{"type": "object", "properties": {"allocations": {"type": "object", "minProperties": ` + fmt.Sprint(minProps) +
		`, "patternProperties": {"` + schemaUUIDPattern + `": {"type": "object", "properties": {"generation": {"type": "integer"}, "resources": ` + schemaResources +
		`}, "required": ["resources"], "additionalProperties": false}}, "additionalProperties": false}, ` +
		`"project_id": ` + schemaOwnerID + `, "user_id": ` + schemaOwnerID + props +
		`}, "additionalProperties": false, "required": ["allocations", "project_id", "user_id"` + req + `]}`
}

func postSchema(consumer string) string {
	return `{"type": "object", "minProperties": 1, "additionalProperties": false, "patternProperties": {"` + schemaUUIDPattern + `": ` + consumer + `}}`
}

var (
	schemaAllocV1_0  = fmt.Sprintf(schemaAllocationList, "", "")
	schemaAllocV1_8  = fmt.Sprintf(schemaAllocationList, `, "project_id": `+schemaOwnerID+`, "user_id": `+schemaOwnerID, `, "project_id", "user_id"`)
	schemaAllocV1_12 = schemaAllocationDict(1, nil, nil)
	schemaAllocV1_28 = schemaAllocationDict(0, []string{`"consumer_generation": ` + schemaConsumerGen}, []string{"consumer_generation"})
	schemaAllocV1_34 = schemaAllocationDict(0, []string{`"consumer_generation": ` + schemaConsumerGen, `"mappings": ` + schemaMappings}, []string{"consumer_generation"})
	schemaAllocV1_38 = schemaAllocationDict(0, []string{`"consumer_generation": ` + schemaConsumerGen, `"mappings": ` + schemaMappings, `"consumer_type": ` + schemaConsumerType}, []string{"consumer_generation", "consumer_type"})

	schemaPostV1_13 = postSchema(schemaAllocationDict(0, nil, nil))
	schemaPostV1_28 = postSchema(schemaAllocV1_28)
	schemaPostV1_34 = postSchema(schemaAllocV1_34)
	schemaPostV1_38 = postSchema(schemaAllocV1_38)
)

// schemaPutAllocations is the PUT /allocations/{c} schema for mv.
func schemaPutAllocations(mv microversion.Version) string {
	switch {
	case mv.AtLeast(1, 38):
		return schemaAllocV1_38
	case mv.AtLeast(1, 34):
		return schemaAllocV1_34
	case mv.AtLeast(1, 28):
		return schemaAllocV1_28
	case mv.AtLeast(1, 12):
		return schemaAllocV1_12
	case mv.AtLeast(1, 8):
		return schemaAllocV1_8
	}
	return schemaAllocV1_0
}

// schemaPostAllocations is the POST /allocations schema for mv (≥ 1.13).
func schemaPostAllocations(mv microversion.Version) string {
	switch {
	case mv.AtLeast(1, 38):
		return schemaPostV1_38
	case mv.AtLeast(1, 34):
		return schemaPostV1_34
	case mv.AtLeast(1, 28):
		return schemaPostV1_28
	}
	return schemaPostV1_13
}

// amount is a resource amount: JSON Schema's "integer" admits 2.0, so an
// integral float decodes too.
type amount int64

func (n *amount) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] == '"' || b[0] == 'n' {
		return fmt.Errorf("%s is not a valid resource amount", b)
	}
	var f json.Number
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	if i, err := f.Int64(); err == nil {
		*n = amount(i)
		return nil
	}
	x, err := f.Float64()
	if err != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return fmt.Errorf("%s is not a valid resource amount", f)
	}
	*n = amount(int64(x))
	return nil
}

type resourcesBody map[string]amount

func (rb resourcesBody) toMap() map[string]int64 {
	out := make(map[string]int64, len(rb))
	for k, v := range rb {
		out[k] = int64(v)
	}
	return out
}

// allocationListBody is the PUT body before 1.12.
type allocationListBody struct {
	Allocations []struct {
		ResourceProvider struct {
			UUID string `json:"uuid"`
		} `json:"resource_provider"`
		Resources resourcesBody `json:"resources"`
	} `json:"allocations"`
	ProjectID string `json:"project_id"`
	UserID    string `json:"user_id"`
}

// allocationDictBody is one consumer's body from 1.12 (PUT, and each
// member of POST).
type allocationDictBody struct {
	Allocations map[string]struct {
		Resources resourcesBody `json:"resources"`
	} `json:"allocations"`
	ProjectID          string `json:"project_id"`
	UserID             string `json:"user_id"`
	ConsumerGeneration *int64 `json:"consumer_generation"`
	ConsumerType       string `json:"consumer_type"`
}

// toWrite converts a dict body into a service write for consumer at mv.
func (b *allocationDictBody) toWrite(consumer string, mv microversion.Version) placement.ConsumerWrite {
	w := placement.ConsumerWrite{
		UUID: consumer, ProjectID: b.ProjectID, UserID: b.UserID,
		CheckGeneration: mv.AtLeast(1, 28), Generation: b.ConsumerGeneration,
		Allocations: make(map[string]map[string]int64, len(b.Allocations)),
	}
	if mv.AtLeast(1, 38) {
		w.Type = b.ConsumerType
	}
	for rp, a := range b.Allocations {
		w.Allocations[rp] = a.Resources.toMap()
	}
	return w
}

// putAllocations handles PUT /allocations/{consumer_uuid}.
func (a *API) putAllocations(w http.ResponseWriter, r *http.Request) error {
	if err := a.policy.Authorize(r.Context(), "placement:allocations:update", ""); err != nil {
		return err
	}
	raw := chi.URLParam(r, "consumer_uuid")
	consumer, ok := placement.NormalizeConsumerUUID(raw)
	if !ok {
		return placement.BadRequest("Malformed consumer_uuid: %s", raw)
	}
	mv := ctxVersion(r.Context())
	var write placement.ConsumerWrite
	if mv.AtLeast(1, 12) {
		var body allocationDictBody
		if _, err := decodeBody(r, schemaPutAllocations(mv), &body); err != nil {
			return err
		}
		write = body.toWrite(consumer, mv)
	} else {
		var body allocationListBody
		if _, err := decodeBody(r, schemaPutAllocations(mv), &body); err != nil {
			return err
		}
		write = placement.ConsumerWrite{UUID: consumer, ProjectID: body.ProjectID, UserID: body.UserID,
			Allocations: make(map[string]map[string]int64, len(body.Allocations))}
		if len(body.Allocations) == 0 {
			return placement.BadRequest("JSON does not validate: allocations must not be empty")
		}
		for _, al := range body.Allocations {
			write.Allocations[al.ResourceProvider.UUID] = al.Resources.toMap()
		}
	}
	if !write.CheckGeneration && len(write.Allocations) == 0 {
		return placement.BadRequest("JSON does not validate: allocations must not be empty")
	}
	if err := a.svc.WriteAllocations(r.Context(), []placement.ConsumerWrite{write}, false); err != nil {
		return err
	}
	return noContent(w)
}

// postAllocations handles POST /allocations (1.13+): many consumers in
// one all-or-nothing write; an empty allocations object clears one.
func (a *API) postAllocations(w http.ResponseWriter, r *http.Request) error {
	if err := a.policy.Authorize(r.Context(), "placement:allocations:manage", ""); err != nil {
		return err
	}
	mv := ctxVersion(r.Context())
	var body map[string]json.RawMessage
	if _, err := decodeBody(r, schemaPostAllocations(mv), &body); err != nil {
		return err
	}
	if len(body) == 0 {
		return placement.BadRequest("JSON does not validate: no consumers given")
	}
	writes := make([]placement.ConsumerWrite, 0, len(body))
	for _, consumer := range sortedConsumers(body) {
		var cb allocationDictBody
		dec := json.NewDecoder(bytes.NewReader(body[consumer]))
		if err := dec.Decode(&cb); err != nil {
			return placement.BadRequest("JSON does not validate: %s", err)
		}
		writes = append(writes, cb.toWrite(consumer, mv))
	}
	if err := a.svc.WriteAllocations(r.Context(), writes, true); err != nil {
		return err
	}
	return noContent(w)
}

func sortedConsumers(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	// Deterministic order: errors name the same consumer every time.
	sort.Strings(out)
	return out
}

// getAllocations handles GET /allocations/{consumer_uuid}.
func (a *API) getAllocations(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:allocations:list", ""); err != nil {
		return err
	}
	mv := ctxVersion(r.Context())
	ca, err := a.svc.GetConsumerAllocations(r.Context(), chi.URLParam(r, "consumer_uuid"))
	if err != nil {
		return err
	}
	allocs := make(map[string]any, len(ca.Providers))
	for rp, p := range ca.Providers {
		allocs[rp] = map[string]any{"generation": p.ProviderGeneration, "resources": p.Resources}
	}
	out := map[string]any{"allocations": allocs}
	if c := ca.Consumer; c != nil && mv.AtLeast(1, 12) {
		out["project_id"] = c.ProjectID
		out["user_id"] = c.UserID
		if mv.AtLeast(1, 28) {
			out["consumer_generation"] = c.Generation
		}
		if mv.AtLeast(1, 38) {
			t := c.Type
			if t == "" {
				t = placement.UnknownConsumerType
			}
			out["consumer_type"] = t
		}
	}
	return writeJSON(w, r, http.StatusOK, out, ca.LastModified)
}

// deleteAllocations handles DELETE /allocations/{consumer_uuid}.
func (a *API) deleteAllocations(w http.ResponseWriter, r *http.Request) error {
	if err := a.policy.Authorize(r.Context(), "placement:allocations:delete", ""); err != nil {
		return err
	}
	if err := a.svc.DeleteAllocations(r.Context(), chi.URLParam(r, "consumer_uuid")); err != nil {
		return err
	}
	return noContent(w)
}

// getProviderAllocations handles GET /resource_providers/{uuid}/allocations.
func (a *API) getProviderAllocations(w http.ResponseWriter, r *http.Request) error {
	if err := checkAccept(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:resource_providers:allocations:list", ""); err != nil {
		return err
	}
	mv := ctxVersion(r.Context())
	pa, err := a.svc.GetProviderAllocations(r.Context(), chi.URLParam(r, "uuid"))
	if err != nil {
		return err
	}
	allocs := make(map[string]any, len(pa.Consumers))
	for c, cr := range pa.Consumers {
		entry := map[string]any{"resources": cr.Resources}
		if mv.AtLeast(1, 28) {
			entry["consumer_generation"] = cr.Generation
		}
		allocs[c] = entry
	}
	return writeJSON(w, r, http.StatusOK, map[string]any{
		"allocations": allocs, "resource_provider_generation": pa.ProviderGeneration,
	}, pa.LastModified)
}
