package instance

import (
	"context"
	"database/sql"

	"github.com/leasehold/leasehold/plugins/host"
)

// DescribeListed is Describe for the reservations of every lease of
// project (of every project when project is nil), in one query joined on
// the leases: the lease listing's read path.
func (p *Plugin) DescribeListed(ctx context.Context, d *sql.DB, project *string) (map[string]map[string]any, error) {
	q := `SELECT i.reservation_id, i.vcpus, i.memory_mb, i.disk_gb, i.amount, i.affinity, i.resource_properties,
 i.flavor_id, i.server_group_id, i.aggregate_id, i.source_flavor FROM instance_reservations i`
	var args []any
	if project != nil {
		q += " JOIN reservations r ON r.id = i.reservation_id JOIN leases l ON l.id = r.lease_id WHERE l.project_id = ?"
		args = append(args, *project)
	}
	rows, err := d.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[string]any{}
	for rows.Next() {
		var id, flavor string
		var ps params
		var affinity sql.NullBool
		var props, source, group sql.NullString
		var aggregate sql.NullInt64
		if err := rows.Scan(&id, &ps.size.VCPUs, &ps.size.MemoryMB, &ps.size.DiskGB, &ps.amount, &affinity, &props,
			&flavor, &group, &aggregate, &source); err != nil {
			return nil, err
		}
		if affinity.Valid {
			ps.affinity = &affinity.Bool
		}
		ps.resourceProperties = props.String
		m := fields(ps, flavor, nullString(group), nullInt(aggregate))
		if source.String != "" {
			m["resource_properties"] = source.String
		}
		out[id] = m
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := host.DescribePoolsListed(ctx, d, project, out); err != nil {
		return nil, err
	}
	return out, nil
}

func nullString(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

func nullInt(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	return &n.Int64
}
