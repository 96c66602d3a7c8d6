package placement

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
)

func (a *API) registerReshaperRoutes(v func(int) microversion.Version) {
	a.route("POST", "/reshaper", v(30), a.reshape)
}

// schemaReshaper is schemas/reshaper.py for mv: inventories as PUT
// …/inventories per provider (at least one), allocations as POST
// /allocations of the same microversion but possibly empty.
func schemaReshaper(mv microversion.Version) string {
	post := schemaPostV1_28
	switch {
	case mv.AtLeast(1, 38):
		post = schemaPostV1_38
	case mv.AtLeast(1, 34):
		post = schemaPostV1_34
	}
	allocs := strings.Replace(post, `"minProperties": 1`, `"minProperties": 0`, 1)
	return `{"type": "object", "properties": {"inventories": {"type": "object", "patternProperties": {"` + schemaUUIDPattern + `": ` +
		schemaPutInventories + `}, "minProperties": 1, "additionalProperties": false}, "allocations": ` + allocs +
		`}, "required": ["inventories", "allocations"], "additionalProperties": false}`
}

// reshape handles POST /reshaper (1.30+): 204 on success.
func (a *API) reshape(w http.ResponseWriter, r *http.Request) error {
	if err := requireJSONContent(r); err != nil {
		return err
	}
	if err := a.policy.Authorize(r.Context(), "placement:reshaper:reshape", ""); err != nil {
		return err
	}
	mv := ctxVersion(r.Context())
	v, body, err := readJSONValue(r, schemaReshaper(mv))
	if err != nil {
		return err
	}
	invsV, _ := v.Get("inventories")
	var invs []placement.ReshapeInventory
	for _, m := range invsV.Members() {
		ri := placement.ReshapeInventory{ProviderUUID: m.Key, Generation: generationFromValue(m.Value)}
		list, _ := m.Value.Get("inventories")
		for _, iv := range list.Members() {
			ri.Inventories = append(ri.Inventories, inventoryFromValue(iv.Key, iv.Value))
		}
		invs = append(invs, ri)
	}
	var raw struct {
		Allocations map[string]json.RawMessage `json:"allocations"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return placement.BadRequest("JSON does not validate: %s", err)
	}
	writes := make([]placement.ConsumerWrite, 0, len(raw.Allocations))
	for _, consumer := range sortedConsumers(raw.Allocations) {
		var cb allocationDictBody
		if err := json.NewDecoder(bytes.NewReader(raw.Allocations[consumer])).Decode(&cb); err != nil {
			return placement.BadRequest("JSON does not validate: %s", err)
		}
		writes = append(writes, cb.toWrite(consumer, mv))
	}
	if err := a.svc.Reshape(r.Context(), invs, writes); err != nil {
		return err
	}
	return noContent(w)
}
