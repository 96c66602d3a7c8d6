// Package models holds the GORM table definitions. It has no behaviour:
// domain logic lives in pkg/, and schema changes go through the versioned
// migrations in pkg/db (which carry their own frozen copies of these
// structs, so editing a model never rewrites history).
package models
