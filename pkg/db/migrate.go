package db

import (
	"context"
	"fmt"
	"time"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/placement/standard"
)

// migrations is the ordered, append-only list of schema changes. Each one
// carries frozen copies of the tables as they were when it was written, so
// later edits to models/ never change what an old migration does. Later
// issues append here (Blazar tables, …); never edit a released migration.
var migrations []*gormigrate.Migration

// register appends a migration; files named NNNN_*.go call it from init in
// id order.
func register(m *gormigrate.Migration) { migrations = append(migrations, m) }

// tableOptions makes MySQL tables InnoDB with a binary utf8mb4 collation,
// so names compare exactly as they do on SQLite.
func tableOptions(tx *gorm.DB) *gorm.DB {
	if tx.Dialector.Name() == "mysql" {
		// Session makes the result reusable: Set alone returns a DB whose
		// statement every later chained call would add to (gormigrate's
		// Table("leasehold_migrations") then leaked into CreateTable).
		return tx.Set("gorm:table_options", "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin").Session(&gorm.Session{})
	}
	return tx
}

// Migrate brings the schema up to date and syncs the standard resource
// classes and traits. It is safe to run concurrently from two processes
// on MySQL only if they agree on the result; run `leasehold db sync` once
// before starting replicas.
func (d *DB) Migrate(ctx context.Context) error {
	if err := d.migrator(ctx, migrations).Migrate(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return d.SyncStandard(ctx)
}

// migrationsTable records the migrations run.
const migrationsTable = "leasehold_migrations"

// migrator runs the list ms (migrations, or in the upgrade tests a prefix
// of it: the schema an older binary left behind).
func (d *DB) migrator(ctx context.Context, ms []*gormigrate.Migration) *gormigrate.Gormigrate {
	return gormigrate.New(tableOptions(d.DB.WithContext(ctx)), &gormigrate.Options{
		TableName:                 migrationsTable,
		IDColumnName:              "id",
		IDColumnSize:              255,
		UseTransaction:            d.Dialect == SQLite, // MySQL DDL is not transactional
		ValidateUnknownMigrations: true,
	}, ms)
}

// SyncStandard inserts any standard resource class or trait missing from
// the database (a newer binary may know more of them).
func (d *DB) SyncStandard(ctx context.Context) error {
	tx := d.DB.WithContext(ctx)
	now := time.Now().UTC().Truncate(time.Second)
	var classes []models.ResourceClass
	for i, name := range standard.ResourceClasses() {
		classes = append(classes, models.ResourceClass{ID: int64(i + 1), Name: name, CreatedAt: now, UpdatedAt: now})
	}
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(classes, 100).Error; err != nil {
		return fmt.Errorf("sync standard resource classes: %w", err)
	}
	var have []string
	if err := tx.Model(&models.Trait{}).Pluck("name", &have).Error; err != nil {
		return fmt.Errorf("sync standard traits: %w", err)
	}
	known := make(map[string]bool, len(have))
	for _, n := range have {
		known[n] = true
	}
	var traits []models.Trait
	for _, name := range standard.Traits() {
		if !known[name] {
			traits = append(traits, models.Trait{Name: name, CreatedAt: now, UpdatedAt: now})
		}
	}
	if len(traits) > 0 {
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(traits, 200).Error; err != nil {
			return fmt.Errorf("sync standard traits: %w", err)
		}
	}
	return nil
}
