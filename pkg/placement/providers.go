package placement

import (
	"context"
	"database/sql"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
)

// Provider is a resource provider as the API shows it.
type Provider struct {
	ID                 int64
	UUID               string
	Name               string
	Generation         int64
	ParentProviderUUID *string
	RootProviderUUID   string
	RootProviderID     int64
	ParentProviderID   *int64
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

const providerSelect = `SELECT rp.id, rp.uuid, rp.name, rp.generation, rp.parent_provider_id, rp.root_provider_id,
 rp.created_at, rp.updated_at, p.uuid AS parent_provider_uuid, r.uuid AS root_provider_uuid
 FROM resource_providers rp
 LEFT JOIN resource_providers p ON p.id = rp.parent_provider_id
 LEFT JOIN resource_providers r ON r.id = rp.root_provider_id`

// GetProvider returns the provider with uuid or a NotFound error.
func (s *Service) GetProvider(ctx context.Context, id string) (*Provider, error) {
	return getProvider(s.conn(ctx), id)
}

func getProvider(tx *gorm.DB, id string) (*Provider, error) {
	p, err := scanProvider(tx, providerRowSelect+" WHERE uuid = ?", id)
	if err == nil && p != nil && (p.ParentProviderID != nil || p.RootProviderID != p.ID) {
		err = fillTreeUUIDs(tx, p)
	}
	if err != nil {
		return nil, wrap("get provider", err)
	}
	if p == nil {
		return nil, NotFound("No resource provider with uuid %s found", id)
	}
	return p, nil
}

// providerRowSelect reads one provider without its tree's uuids, in the
// column order of providerSelect: most providers are roots, whose root
// uuid is their own, and the simpler statement costs SQLite (which
// compiles every statement it runs) a good deal less than the joins.
const providerRowSelect = `SELECT id, uuid, name, generation, parent_provider_id, root_provider_id,
 created_at, updated_at, NULL, uuid FROM resource_providers`

// fillTreeUUIDs sets the parent and root uuids of a provider read with
// providerRowSelect that is not a root.
func fillTreeUUIDs(tx *gorm.DB, p *Provider) error {
	parentID := int64(-1)
	if p.ParentProviderID != nil {
		parentID = *p.ParentProviderID
	}
	rows, err := db.SQLOf(tx).QueryContext(tx.Statement.Context, "SELECT id, uuid FROM resource_providers WHERE id IN (?, ?)", parentID, p.RootProviderID)
	if err != nil {
		return err
	}
	defer rows.Close()
	p.RootProviderUUID = ""
	for rows.Next() {
		var id int64
		var u string
		if err := rows.Scan(&id, &u); err != nil {
			return err
		}
		if id == parentID {
			p.ParentProviderUUID = &u
		}
		if id == p.RootProviderID {
			p.RootProviderUUID = u
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if p.RootProviderUUID == "" || (p.ParentProviderID != nil && p.ParentProviderUUID == nil) {
		// The tree moved between the two reads: read it in one statement.
		q, err := scanProvider(tx, providerSelect+" WHERE rp.id = ?", p.ID)
		if err != nil {
			return err
		}
		if q == nil {
			return NotFound("No resource provider with uuid %s found", p.UUID)
		}
		*p = *q
	}
	return nil
}

// getProviderByID re-reads the provider row inside tx.
func getProviderByID(tx *gorm.DB, id int64) (*Provider, error) {
	p, err := scanProvider(tx, providerSelect+" WHERE rp.id = ?", id)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, NotFound("No resource provider with id %d found", id)
	}
	return p, nil
}

// scanProvider runs a providerSelect query for one row on tx's
// connection or transaction with database/sql directly (no GORM
// reflection: this is the GET /resource_providers/{uuid} path); nil when
// there is no row.
func scanProvider(tx *gorm.DB, q string, args ...any) (*Provider, error) {
	rows, err := db.SQLOf(tx).QueryContext(tx.Statement.Context, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	p := &Provider{}
	var parentID sql.NullInt64
	var parentUUID, rootUUID sql.NullString
	if err := rows.Scan(&p.ID, &p.UUID, &p.Name, &p.Generation, &parentID, &p.RootProviderID,
		&p.CreatedAt, &p.UpdatedAt, &parentUUID, &rootUUID); err != nil {
		return nil, err
	}
	if parentID.Valid {
		p.ParentProviderID = &parentID.Int64
	}
	if parentUUID.Valid {
		p.ParentProviderUUID = &parentUUID.String
	}
	p.RootProviderUUID = rootUUID.String
	return p, rows.Close()
}

// CreateProvider creates a provider. uuidStr may be "" (one is made up);
// parentUUID may be nil.
func (s *Service) CreateProvider(ctx context.Context, name, uuidStr string, parentUUID *string) (*Provider, error) {
	if uuidStr == "" {
		uuidStr = uuid.NewString()
	}
	var out *Provider
	err := s.wtx(ctx, func(tx *gorm.DB) error {
		p, err := CreateProviderTx(tx, name, uuidStr, parentUUID)
		out = p
		return err
	})
	return out, err
}

// CreateProviderTx creates a provider inside an existing transaction (used
// by services that create providers together with their own rows).
func CreateProviderTx(tx *gorm.DB, name, uuidStr string, parentUUID *string) (*Provider, error) {
	t := now()
	rp := models.ResourceProvider{UUID: uuidStr, Name: name, CreatedAt: t, UpdatedAt: t}
	if parentUUID != nil {
		if *parentUUID == uuidStr {
			return nil, BadRequest("Unable to create resource provider \"%s\", %s: Object action create failed because: parent provider UUID cannot be same as UUID. Please set parent provider UUID to None if there is no parent.", name, uuidStr)
		}
		var parent models.ResourceProvider
		if err := tx.Where("uuid = ?", *parentUUID).Take(&parent).Error; err != nil {
			if isNotFound(err) {
				return nil, BadRequest("Unable to create resource provider \"%s\", %s: Object action create failed because: parent provider UUID does not exist.", name, uuidStr)
			}
			return nil, err
		}
		rp.ParentProviderID = &parent.ID
		rp.RootProviderID = parent.RootProviderID
	}
	// Check duplicates first for upstream's messages; the unique indexes
	// still guard against a concurrent create.
	var dup []models.ResourceProvider
	if err := tx.Where("uuid = ? OR name = ?", uuidStr, name).Find(&dup).Error; err != nil {
		return nil, err
	}
	// The uuid index is checked first, as the database reports it.
	for _, d := range dup {
		if d.UUID == uuidStr {
			return nil, Conflict(CodeDuplicateName, "Conflicting resource provider uuid: %s already exists.", uuidStr)
		}
	}
	if len(dup) > 0 {
		return nil, Conflict(CodeDuplicateName, "Conflicting resource provider name: %s already exists.", name)
	}
	if err := tx.Create(&rp).Error; err != nil {
		if db.IsDuplicate(err) {
			return nil, Conflict(CodeDuplicateName, "Conflicting resource provider name: %s already exists.", name)
		}
		return nil, err
	}
	if rp.ParentProviderID == nil {
		rp.RootProviderID = rp.ID
		if err := tx.Model(&rp).Update("root_provider_id", rp.ID).Error; err != nil {
			return nil, err
		}
	}
	return getProviderByID(tx, rp.ID)
}

// UpdateProvider renames and/or re-parents a provider. parentGiven says
// whether the body had parent_provider_uuid (nil value = un-parent).
// allowReparent is microversion ≥ 1.37 semantics.
func (s *Service) UpdateProvider(ctx context.Context, id, name string, parentGiven bool, parentUUID *string, allowReparent bool) (*Provider, error) {
	var out *Provider
	err := s.wtx(ctx, func(tx *gorm.DB) error {
		p, err := getProvider(tx, id)
		if err != nil {
			return err
		}
		updates := map[string]any{"name": name, "updated_at": now()}
		if parentGiven {
			if err := s.reparent(tx, p, parentUUID, allowReparent, updates); err != nil {
				return err
			}
		}
		if name != p.Name {
			var n int64
			if err := tx.Model(&models.ResourceProvider{}).Where("name = ? AND id <> ?", name, p.ID).Count(&n).Error; err != nil {
				return err
			}
			if n > 0 {
				return Conflict(CodeDuplicateName, "Conflicting resource provider %s already exists.", name)
			}
		}
		if err := tx.Model(&models.ResourceProvider{}).Where("id = ?", p.ID).Updates(updates).Error; err != nil {
			if db.IsDuplicate(err) {
				return Conflict(CodeDuplicateName, "Conflicting resource provider %s already exists.", name)
			}
			return err
		}
		out, err = getProviderByID(tx, p.ID)
		return err
	})
	return out, err
}

func (s *Service) reparent(tx *gorm.DB, p *Provider, parentUUID *string, allowReparent bool, updates map[string]any) error {
	cur := p.ParentProviderUUID
	if parentUUID == nil {
		if cur == nil {
			return nil
		}
		if !allowReparent {
			return BadRequest("Unable to save resource provider %s: Object action update failed because: un-parenting a provider is not currently allowed.", p.UUID)
		}
		updates["parent_provider_id"] = nil
		return s.moveSubtree(tx, p, p.ID, updates)
	}
	if cur != nil && *cur == *parentUUID {
		return nil
	}
	if *parentUUID == p.UUID {
		return BadRequest("Unable to save resource provider %s: Object action update failed because: creating loop in the provider tree is not allowed.", p.UUID)
	}
	if cur != nil && !allowReparent {
		return BadRequest("Unable to save resource provider %s: Object action update failed because: re-parenting a provider is not currently allowed.", p.UUID)
	}
	var parent models.ResourceProvider
	if err := tx.Where("uuid = ?", *parentUUID).Take(&parent).Error; err != nil {
		if isNotFound(err) {
			return BadRequest("Unable to save resource provider %s: Object action create failed because: parent provider UUID does not exist.", p.UUID)
		}
		return err
	}
	// The new parent must not be inside p's own subtree.
	sub, err := subtreeIDs(tx, p.ID)
	if err != nil {
		return err
	}
	for _, id := range sub {
		if id == parent.ID {
			return BadRequest("Unable to save resource provider %s: Object action update failed because: creating loop in the provider tree is not allowed.", p.UUID)
		}
	}
	updates["parent_provider_id"] = parent.ID
	return s.moveSubtree(tx, p, parent.RootProviderID, updates)
}

// moveSubtree sets the root of p's whole subtree to newRoot.
func (s *Service) moveSubtree(tx *gorm.DB, p *Provider, newRoot int64, updates map[string]any) error {
	if newRoot == p.RootProviderID {
		return nil
	}
	sub, err := subtreeIDs(tx, p.ID)
	if err != nil {
		return err
	}
	return tx.Model(&models.ResourceProvider{}).Where("id IN ?", sub).Update("root_provider_id", newRoot).Error
}

// subtreeIDs returns id and all its descendants.
func subtreeIDs(tx *gorm.DB, id int64) ([]int64, error) {
	var root int64
	if err := tx.Model(&models.ResourceProvider{}).Where("id = ?", id).Pluck("root_provider_id", &root).Error; err != nil {
		return nil, err
	}
	type link struct {
		ID               int64
		ParentProviderID *int64
	}
	var tree []link
	if err := tx.Model(&models.ResourceProvider{}).Where("root_provider_id = ?", root).Find(&tree).Error; err != nil {
		return nil, err
	}
	children := map[int64][]int64{}
	for _, l := range tree {
		if l.ParentProviderID != nil {
			children[*l.ParentProviderID] = append(children[*l.ParentProviderID], l.ID)
		}
	}
	out := []int64{id}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// DeleteProvider deletes a provider that has no allocations and no
// children, with its inventories, traits and aggregate links.
func (s *Service) DeleteProvider(ctx context.Context, id string) error {
	return s.wtx(ctx, func(tx *gorm.DB) error {
		var rp models.ResourceProvider
		if err := tx.Where("uuid = ?", id).Take(&rp).Error; err != nil {
			if isNotFound(err) {
				return NotFound("No resource provider with uuid %s found for delete", id)
			}
			return err
		}
		var n int64
		if err := tx.Model(&models.Allocation{}).Where("resource_provider_id = ?", rp.ID).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return Conflict(CodeProviderInUse, "Unable to delete resource provider %s: Resource provider has allocations.", id)
		}
		if err := tx.Model(&models.ResourceProvider{}).Where("parent_provider_id = ?", rp.ID).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return Conflict(CodeCannotDeleteParent, "Unable to delete parent resource provider %s: It has child resource providers.", id)
		}
		for _, q := range []string{
			"DELETE FROM inventories WHERE resource_provider_id = ?",
			"DELETE FROM resource_provider_traits WHERE resource_provider_id = ?",
			"DELETE FROM resource_provider_aggregates WHERE resource_provider_id = ?",
		} {
			if err := tx.Exec(q, rp.ID).Error; err != nil {
				return err
			}
		}
		res := tx.Exec("DELETE FROM resource_providers WHERE id = ? AND generation = ?", rp.ID, rp.Generation)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errConcurrent("resource provider generation conflict")
		}
		return nil
	})
}

// ProviderFilter selects providers for GET /resource_providers. Empty
// fields do not filter.
type ProviderFilter struct {
	Name string
	UUID string
	// InTree restricts to the tree holding this provider uuid (an unknown
	// uuid matches nothing).
	InTree string
	// MemberOf: each entry is a set of aggregate uuids the provider must be
	// in at least one of (ANDed across entries). ForbiddenAggs: aggregates
	// the provider must be in none of.
	MemberOf      [][]string
	ForbiddenAggs []string
	// Resources: the provider must have capacity for each amount, within
	// its min_unit/max_unit/step_size.
	Resources Resources
	// RequiredTraits: each entry is a set of traits of which the provider
	// must have at least one (ANDed across entries). ForbiddenTraits: the
	// provider must have none of them.
	RequiredTraits  [][]string
	ForbiddenTraits []string
}

// listProvidersSQL answers ListProviders from the database alone. It
// follows upstream's evaluation order, which decides which bad filter
// is reported and when an empty list wins over an error: in_tree (an
// unknown provider gives []), required traits (an unknown trait is a 400
// "No such trait(s): X."; no provider having them gives []), forbidden
// traits (unknown → 400), member_of (no provider in them gives []),
// forbidden aggregates, then resources (an unknown class is a 400 "No
// such resource class X."). The errors are BadRequest *errs.Error whose
// message is the bare exception text; the handler adds its prefix.
func (s *Service) listProvidersSQL(ctx context.Context, f ProviderFilter) ([]Provider, error) {
	c := s.conn(ctx)
	q := providerSelect + " WHERE 1=1"
	var args []any
	if f.Name != "" {
		q += " AND rp.name = ?"
		args = append(args, f.Name)
	}
	if f.UUID != "" {
		q += " AND rp.uuid = ?"
		args = append(args, f.UUID)
	}
	if f.InTree != "" {
		var roots []int64
		if err := c.Raw("SELECT root_provider_id FROM resource_providers WHERE uuid = ?", f.InTree).Scan(&roots).Error; err != nil {
			return nil, wrap("list providers", err)
		}
		if len(roots) == 0 {
			return []Provider{}, nil
		}
		q += " AND rp.root_provider_id = ?"
		args = append(args, roots[0])
	}
	if len(f.RequiredTraits) > 0 {
		var names []string
		for _, any := range f.RequiredTraits {
			names = append(names, any...)
		}
		ids, err := traitIDs(c, names)
		if err != nil {
			return nil, asBadRequest(err)
		}
		cond := ""
		var cargs []any
		for _, any := range f.RequiredTraits {
			set := make([]int64, 0, len(any))
			for _, n := range any {
				set = append(set, ids[n])
			}
			cond += " AND rp.id IN (SELECT resource_provider_id FROM resource_provider_traits WHERE trait_id IN ?)"
			cargs = append(cargs, set)
		}
		if ok, err := anyProvider(c, cond, cargs); err != nil || !ok {
			return []Provider{}, err
		}
		q += cond
		args = append(args, cargs...)
	}
	if len(f.ForbiddenTraits) > 0 {
		ids, err := traitIDs(c, f.ForbiddenTraits)
		if err != nil {
			return nil, asBadRequest(err)
		}
		set := make([]int64, 0, len(ids))
		for _, n := range f.ForbiddenTraits {
			set = append(set, ids[n])
		}
		q += " AND rp.id NOT IN (SELECT resource_provider_id FROM resource_provider_traits WHERE trait_id IN ?)"
		args = append(args, set)
	}
	if len(f.MemberOf) > 0 {
		cond := ""
		var cargs []any
		for _, aggs := range f.MemberOf {
			cond += ` AND rp.id IN (SELECT rpa.resource_provider_id FROM resource_provider_aggregates rpa
 JOIN placement_aggregates a ON a.id = rpa.aggregate_id WHERE a.uuid IN ?)`
			cargs = append(cargs, aggs)
		}
		if ok, err := anyProvider(c, cond, cargs); err != nil || !ok {
			return []Provider{}, err
		}
		q += cond
		args = append(args, cargs...)
	}
	if len(f.ForbiddenAggs) > 0 {
		q += ` AND rp.id NOT IN (SELECT rpa.resource_provider_id FROM resource_provider_aggregates rpa
 JOIN placement_aggregates a ON a.id = rpa.aggregate_id WHERE a.uuid IN ?)`
		args = append(args, f.ForbiddenAggs)
	}
	for _, r := range f.Resources {
		ids, err := resourceClassIDs(c, []string{r.Class})
		if err != nil {
			return nil, asBadRequest(err)
		}
		q += " AND rp.id IN (" + capacitySubquery + ")"
		rc := ids[r.Class]
		args = append(args, rc, r.Amount, r.Amount, r.Amount, r.Amount)
	}
	q += " ORDER BY rp.id"
	ps := []Provider{}
	if err := c.Raw(q, args...).Scan(&ps).Error; err != nil {
		return nil, wrap("list providers", err)
	}
	return ps, nil
}

// capacitySubquery selects the providers with room for an amount of one
// class (research_context.get_providers_with_resource): usage plus the
// amount within capacity, the amount within min_unit/max_unit and a
// multiple of step_size. The usage is summed per inventory row through
// the allocations (provider, class) index. Arguments: class id, amount,
// amount, amount, amount.
const capacitySubquery = `SELECT inv.resource_provider_id FROM inventories inv
 WHERE inv.resource_class_id = ?
 AND COALESCE((SELECT SUM(a.used) FROM allocations a
   WHERE a.resource_provider_id = inv.resource_provider_id AND a.resource_class_id = inv.resource_class_id), 0) + ?
   <= (inv.total - inv.reserved) * inv.allocation_ratio
 AND inv.min_unit <= ? AND inv.max_unit >= ? AND ? % inv.step_size = 0`

// anyProvider reports whether some provider satisfies cond (the early
// "no match: empty list" exits of upstream's filter evaluation).
func anyProvider(c *gorm.DB, cond string, args []any) (bool, error) {
	var ids []int64
	if err := c.Raw("SELECT rp.id FROM resource_providers rp WHERE 1=1"+cond+" LIMIT 1", args...).Scan(&ids).Error; err != nil {
		return false, wrap("list providers", err)
	}
	return len(ids) > 0, nil
}
