package placement

import (
	"context"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
)

// Trait is a standard or custom trait.
type Trait struct {
	ID        int64
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TraitFilter selects traits for GET /traits. Nil fields do not filter.
type TraitFilter struct {
	// NameIn keeps the traits with one of these names.
	NameIn []string
	// Prefix keeps the traits whose name starts with it.
	Prefix *string
	// Associated keeps the traits some provider has (true) or no
	// provider has (false).
	Associated *bool
}

// errNoSuchTrait is exception.TraitNotFound.
func errNoSuchTrait(names ...string) *errs.Error {
	return NotFound("No such trait(s): %s.", strings.Join(names, ", "))
}

// ListTraits returns the traits matching f, ordered by id.
func (s *Service) ListTraits(ctx context.Context, f TraitFilter) ([]Trait, error) {
	q := "SELECT t.id, t.name, t.created_at, t.updated_at FROM traits t WHERE 1=1"
	var args []any
	if f.NameIn != nil {
		if len(f.NameIn) == 0 {
			return nil, nil
		}
		q += " AND t.name IN ?"
		args = append(args, f.NameIn)
	}
	if f.Prefix != nil {
		// LIKE with the prefix escaped: '%' and '_' in a prefix are literal
		// in intent; upstream passes them to LIKE unescaped, so do the same.
		q += " AND t.name LIKE ?"
		args = append(args, *f.Prefix+"%")
	}
	if f.Associated != nil {
		if *f.Associated {
			q += " AND EXISTS (SELECT 1 FROM resource_provider_traits rpt WHERE rpt.trait_id = t.id)"
		} else {
			q += " AND NOT EXISTS (SELECT 1 FROM resource_provider_traits rpt WHERE rpt.trait_id = t.id)"
		}
	}
	// Upstream's order is the database's: a name IN (…) lookup walks the
	// unique name index (sorted by name), anything else the table.
	if f.NameIn != nil {
		q += " ORDER BY t.name"
	} else {
		q += " ORDER BY t.id"
	}
	var out []Trait
	err := s.conn(ctx).Raw(q, args...).Scan(&out).Error
	return out, wrap("list traits", err)
}

// GetTrait returns the trait name or a NotFound error.
func (s *Service) GetTrait(ctx context.Context, name string) (*Trait, error) {
	return getTrait(s.conn(ctx), name)
}

func getTrait(tx *gorm.DB, name string) (*Trait, error) {
	return getNamed[Trait](tx, "traits", name, func(n string) error { return errNoSuchTrait(n) })
}

// EnsureTrait creates the custom trait name unless it exists, reporting
// whether it did (PUT /traits/{name}).
func (s *Service) EnsureTrait(ctx context.Context, name string) (*Trait, bool, error) {
	if t, err := s.GetTrait(ctx, name); err == nil {
		return t, false, nil
	} else if !IsNotFoundErr(err) {
		return nil, false, err
	}
	ts := now()
	row := models.Trait{Name: name, CreatedAt: ts, UpdatedAt: ts}
	if err := s.conn(ctx).Create(&row).Error; err != nil {
		if db.IsDuplicate(err) {
			t, gerr := s.GetTrait(ctx, name)
			return t, false, gerr
		}
		return nil, false, wrap("create trait", err)
	}
	return &Trait{ID: row.ID, Name: name, CreatedAt: ts, UpdatedAt: ts}, true, nil
}

// DeleteTrait deletes a custom trait no provider has.
func (s *Service) DeleteTrait(ctx context.Context, name string) error {
	return s.wtx(ctx, func(tx *gorm.DB) error {
		t, err := getTrait(tx, name)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(name, "CUSTOM_") {
			return BadRequest("Cannot delete standard trait %s.", name)
		}
		var n int64
		if err := tx.Model(&models.ResourceProviderTrait{}).Where("trait_id = ?", t.ID).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return Conflict("", "The trait %s is in use by a resource provider.", name)
		}
		res := tx.Exec("DELETE FROM traits WHERE id = ?", t.ID)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errNoSuchTrait(name)
		}
		return nil
	})
}

// traitIDs maps trait names to ids; unknown names are an errNoSuchTrait
// naming the first unknown one in the order given.
func traitIDs(tx *gorm.DB, names []string) (map[string]int64, error) {
	return namedIDs(tx, "traits", names, func(n string) error { return errNoSuchTrait(n) })
}

// ProviderTraits returns the provider and its traits (ordered by id).
func (s *Service) ProviderTraits(ctx context.Context, uuid string) (*Provider, []Trait, error) {
	c := s.conn(ctx)
	p, err := getProvider(c, uuid)
	if err != nil {
		return nil, nil, err
	}
	traits, err := providerTraits(c, p.ID)
	return p, traits, err
}

func providerTraits(tx *gorm.DB, providerID int64) ([]Trait, error) {
	var out []Trait
	err := tx.Raw(`SELECT t.id, t.name, t.created_at, t.updated_at FROM traits t
 JOIN resource_provider_traits rpt ON rpt.trait_id = t.id
 WHERE rpt.resource_provider_id = ? ORDER BY t.id`, providerID).Scan(&out).Error
	return out, wrap("provider traits", err)
}

// SetProviderTraits replaces the provider's traits with names after
// checking its generation (PUT /resource_providers/{uuid}/traits). An
// unknown trait is a 400 naming every unknown one; a changed generation
// is a 409 placement.concurrent_update. The generation is bumped only when
// the set changes.
func (s *Service) SetProviderTraits(ctx context.Context, uuid string, generation int64, names []string) (*Provider, []Trait, error) {
	var outP *Provider
	var outT []Trait
	err := s.wtx(ctx, func(tx *gorm.DB) error {
		p, err := getProvider(tx, uuid)
		if err != nil {
			return err
		}
		if p.Generation != generation {
			return errConcurrent("Resource provider's generation already changed. Please update the generation and try again.")
		}
		want, err := traitsByName(tx, names)
		if err != nil {
			return err
		}
		if err := setProviderTraits(tx, p, want); err != nil {
			return err
		}
		outP, err = getProviderByID(tx, p.ID)
		outT = want
		return err
	})
	return outP, outT, err
}

// traitsByName loads the named traits (ordered by name, as upstream's
// name IN lookup returns them); any unknown ones are a 400 "No such
// trait X, Y" (upstream lists the set difference).
func traitsByName(tx *gorm.DB, names []string) ([]Trait, error) {
	uniq := map[string]bool{}
	var list []string
	for _, n := range names {
		if !uniq[n] {
			uniq[n] = true
			list = append(list, n)
		}
	}
	var found []Trait
	if len(list) > 0 {
		if err := tx.Raw("SELECT id, name, created_at, updated_at FROM traits WHERE name IN ? ORDER BY name", list).Scan(&found).Error; err != nil {
			return nil, wrap("traits by name", err)
		}
	}
	have := map[string]bool{}
	for _, t := range found {
		have[t.Name] = true
	}
	var missing []string
	for _, n := range list {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, BadRequest("No such trait %s", strings.Join(missing, ", "))
	}
	return found, nil
}

// setProviderTraits makes p's traits exactly want, bumping the
// generation (optimistically, against p.Generation) if anything changed.
func setProviderTraits(tx *gorm.DB, p *Provider, want []Trait) error {
	have, err := providerTraits(tx, p.ID)
	if err != nil {
		return err
	}
	haveSet := map[int64]bool{}
	for _, t := range have {
		haveSet[t.ID] = true
	}
	wantSet := map[int64]bool{}
	for _, t := range want {
		wantSet[t.ID] = true
	}
	var add, del []int64
	for _, t := range want {
		if !haveSet[t.ID] {
			add = append(add, t.ID)
		}
	}
	for _, t := range have {
		if !wantSet[t.ID] {
			del = append(del, t.ID)
		}
	}
	if len(add) == 0 && len(del) == 0 {
		return nil
	}
	if len(del) > 0 {
		if err := tx.Exec("DELETE FROM resource_provider_traits WHERE resource_provider_id = ? AND trait_id IN ?", p.ID, del).Error; err != nil {
			return err
		}
	}
	for _, id := range add {
		if err := tx.Create(&models.ResourceProviderTrait{ResourceProviderID: p.ID, TraitID: id}).Error; err != nil {
			if db.IsDuplicate(err) {
				return errConcurrent("Another thread concurrently updated the resource provider data. Please retry your update")
			}
			return err
		}
	}
	if err := bumpGeneration(tx, p.ID, p.Generation, now()); err != nil {
		return errConcurrent("Another thread concurrently updated the resource provider data. Please retry your update")
	}
	return nil
}

// DeleteProviderTraits removes every trait of the provider (DELETE
// /resource_providers/{uuid}/traits), bumping its generation if it had
// any.
func (s *Service) DeleteProviderTraits(ctx context.Context, uuid string) error {
	return s.wtx(ctx, func(tx *gorm.DB) error {
		p, err := getProvider(tx, uuid)
		if err != nil {
			return err
		}
		return setProviderTraits(tx, p, nil)
	})
}
