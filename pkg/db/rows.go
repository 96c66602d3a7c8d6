package db

import (
	"context"
	"database/sql"
)

// EachRow runs query q on d and calls scan for each row: the typed-row
// read paths (listings) that skip GORM's reflection.
func EachRow(ctx context.Context, d *sql.DB, q string, args []any, scan func(*sql.Rows) error) error {
	rows, err := d.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
