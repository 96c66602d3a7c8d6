package hosts

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
)

// Host is a registered host as the API shows it.
type Host struct {
	ID                 string
	HypervisorHostname string
	ServiceName        string
	VCPUs              int64
	MemoryMB           int64
	LocalGB            int64
	HypervisorType     string
	HypervisorVersion  int64
	CPUInfo            string
	AvailabilityZone   string
	Status             *string
	Reservable         bool
	TrustID            *string
	CreatedAt          time.Time
	UpdatedAt          *time.Time
	// ExtraCapabilities maps capability name to value.
	ExtraCapabilities map[string]string
	// ComputeProviderUUID and ReservationProviderUUID are the host's
	// Placement providers (compute node, blazar_<hostname> child).
	ComputeProviderUUID     string
	ReservationProviderUUID string
}

// Lookup returns the value of a host field, or else of an extra
// capability, as hostquery compares it. A NULL field (status, trust_id)
// is absent.
func (h *Host) Lookup(key string) (string, bool) {
	switch key {
	case "id":
		return h.ID, true
	case "hypervisor_hostname":
		return h.HypervisorHostname, true
	case "service_name":
		return h.ServiceName, true
	case "vcpus":
		return strconv.FormatInt(h.VCPUs, 10), true
	case "memory_mb":
		return strconv.FormatInt(h.MemoryMB, 10), true
	case "local_gb":
		return strconv.FormatInt(h.LocalGB, 10), true
	case "hypervisor_type":
		return h.HypervisorType, true
	case "hypervisor_version":
		return strconv.FormatInt(h.HypervisorVersion, 10), true
	case "cpu_info":
		return h.CPUInfo, true
	case "availability_zone":
		return h.AvailabilityZone, true
	case "reservable":
		return strconv.FormatBool(h.Reservable), true
	case "status":
		if h.Status == nil {
			return "", false
		}
		return *h.Status, true
	case "trust_id":
		if h.TrustID == nil {
			return "", false
		}
		return *h.TrustID, true
	}
	v, ok := h.ExtraCapabilities[key]
	return v, ok
}

func toHost(r *models.ComputeHost, caps map[string]string) Host {
	if caps == nil {
		caps = map[string]string{}
	}
	return Host{
		ID: strconv.FormatInt(r.ID, 10), HypervisorHostname: r.HypervisorHostname, ServiceName: r.ServiceName,
		VCPUs: r.VCPUs, MemoryMB: r.MemoryMB, LocalGB: r.LocalGB, HypervisorType: r.HypervisorType,
		HypervisorVersion: r.HypervisorVersion, CPUInfo: r.CPUInfo, AvailabilityZone: r.AvailabilityZone,
		Status: r.Status, Reservable: r.Reservable, TrustID: r.TrustID, CreatedAt: r.CreatedAt.UTC(),
		UpdatedAt: utcPtr(r.UpdatedAt), ExtraCapabilities: caps,
		ComputeProviderUUID: r.ComputeProviderUUID, ReservationProviderUUID: r.ReservationProviderUUID,
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// hostColumns are read by scanHosts, in this order.
const hostColumns = `id, vcpus, cpu_info, hypervisor_type, hypervisor_version, hypervisor_hostname, service_name,
 memory_mb, local_gb, status, availability_zone, trust_id, reservable, compute_provider_uuid,
 reservation_provider_uuid, owns_compute_provider, created_at, updated_at`

// scanHosts reads computehosts rows with plain database/sql scanning (no
// reflection: this is the hot path of a cold Reservable).
func scanHosts(tx *gorm.DB, where string, args ...any) ([]models.ComputeHost, error) {
	q := "SELECT " + hostColumns + " FROM computehosts"
	if where != "" {
		q += " WHERE " + where
	}
	rows, err := tx.Raw(q+" ORDER BY id", args...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []models.ComputeHost
	for rows.Next() {
		var (
			r       models.ComputeHost
			status  sql.NullString
			trust   sql.NullString
			updated sql.NullTime
		)
		if err := rows.Scan(&r.ID, &r.VCPUs, &r.CPUInfo, &r.HypervisorType, &r.HypervisorVersion, &r.HypervisorHostname,
			&r.ServiceName, &r.MemoryMB, &r.LocalGB, &status, &r.AvailabilityZone, &trust, &r.Reservable,
			&r.ComputeProviderUUID, &r.ReservationProviderUUID, &r.OwnsComputeProvider, &r.CreatedAt, &updated); err != nil {
			return nil, err
		}
		if status.Valid {
			r.Status = &status.String
		}
		if trust.Valid {
			r.TrustID = &trust.String
		}
		if updated.Valid {
			r.UpdatedAt = &updated.Time
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// loadCaps reads capabilities keyed by host row id: of one host when
// hostID > 0, else of every host. Property names are read separately (a
// small table) so the capability read is a plain scan without joins.
func loadCaps(tx *gorm.DB, hostID int64) (map[int64]map[string]string, error) {
	names := map[string]string{}
	prows, err := tx.Raw("SELECT id, property_name FROM resource_properties WHERE resource_type = ?", ResourceType).Rows()
	if err != nil {
		return nil, err
	}
	defer prows.Close()
	for prows.Next() {
		var id, name string
		if err := prows.Scan(&id, &name); err != nil {
			return nil, err
		}
		names[id] = name
	}
	if err := prows.Err(); err != nil {
		return nil, err
	}
	q := "SELECT computehost_id, property_id, capability_value FROM computehost_extra_capabilities"
	var args []any
	if hostID > 0 {
		q += " WHERE computehost_id = ?"
		args = append(args, hostID)
	}
	rows, err := tx.Raw(q, args...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]map[string]string{}
	var (
		hid      int64
		pid, val string
		lastID   int64 = -1
		lastCaps map[string]string
	)
	for rows.Next() {
		if err := rows.Scan(&hid, &pid, &val); err != nil {
			return nil, err
		}
		name, ok := names[pid]
		if !ok {
			continue
		}
		if hid != lastID {
			lastID = hid
			lastCaps = out[hid]
			if lastCaps == nil {
				lastCaps = map[string]string{}
				out[hid] = lastCaps
			}
		}
		lastCaps[name] = val
	}
	return out, rows.Err()
}

// listHosts reads the hosts (only the reservable ones if asked) and their
// capabilities.
func listHosts(tx *gorm.DB, reservableOnly bool) ([]Host, error) {
	where, args := "", []any(nil)
	if reservableOnly {
		where, args = "reservable = ?", []any{true}
	}
	rows, err := scanHosts(tx, where, args...)
	if err != nil {
		return nil, err
	}
	caps, err := loadCaps(tx, 0)
	if err != nil {
		return nil, err
	}
	out := make([]Host, len(rows))
	for i := range rows {
		out[i] = toHost(&rows[i], caps[rows[i].ID])
	}
	return out, nil
}

// Get returns the host with API id, or errs.NotFound.
func (s *Service) Get(ctx context.Context, id string) (*Host, error) {
	return getHost(s.db.WithContext(ctx), id)
}

func getHost(tx *gorm.DB, id string) (*Host, error) {
	n, ok := parseID(id)
	if !ok {
		return nil, notFound(id)
	}
	rows, err := scanHosts(tx, "id = ?", n)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, notFound(id)
	}
	caps, err := loadCaps(tx, n)
	if err != nil {
		return nil, err
	}
	h := toHost(&rows[0], caps[n])
	return &h, nil
}
