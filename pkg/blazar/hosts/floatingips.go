package hosts

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/db"
	"github.com/leasehold/leasehold/pkg/errs"
)

// FloatingIPResourceType is the Blazar resource type of floating IPs.
const FloatingIPResourceType = "virtual:floatingip"

// FloatingIP is an address of the virtual:floatingip pool.
type FloatingIP struct {
	ID                string
	FloatingNetworkID string
	SubnetID          *string
	FloatingIPAddress string
	Reservable        bool
	CreatedAt         time.Time
	UpdatedAt         *time.Time
}

func toFloatingIP(r *models.FloatingIP) FloatingIP {
	return FloatingIP{ID: r.ID, FloatingNetworkID: r.FloatingNetworkID, SubnetID: r.SubnetID,
		FloatingIPAddress: r.FloatingIPAddress, Reservable: r.Reservable, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: utcPtr(r.UpdatedAt)}
}

func fipNotFound(id string) *errs.Error {
	return errs.NotFoundf("Object with {'floatingip_id': '%s'} not found", id)
}

// CreateFloatingIP adds an address to the pool. Without Neutron
// (standalone) the network is not checked; the address must be a valid
// IPv4 or IPv6 address and not already in the pool on that network.
func (s *Service) CreateFloatingIP(ctx context.Context, networkID, address string) (*FloatingIP, error) {
	networkID = strings.TrimSpace(networkID)
	if networkID == "" {
		return nil, errs.BadRequestf("Missing parameter `floating_network_id`")
	}
	if len(networkID) > 255 {
		return nil, errs.BadRequestf("Malformed parameter `floating_network_id`: at most 255 characters")
	}
	if address == "" {
		return nil, errs.BadRequestf("Missing parameter `floating_ip_address`")
	}
	ip, err := netip.ParseAddr(address)
	if err != nil || ip.Zone() != "" {
		return nil, errs.BadRequestf("%s is an invalid IP format", address)
	}
	canon := ip.String()
	if ip.IsUnspecified() || ip.IsMulticast() || ip.IsLoopback() {
		return nil, errs.BadRequestf("%s cannot be a floating IP (unspecified, loopback or multicast address)", address)
	}
	var out *FloatingIP
	err = s.db.Write(ctx, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&models.FloatingIP{}).Where("floating_network_id = ? AND floating_ip_address = ?", networkID, canon).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return errs.Conflictf("Floating IP %s already exists on network %s.", canon, networkID)
		}
		row := models.FloatingIP{ID: uuid.NewString(), FloatingNetworkID: networkID, FloatingIPAddress: canon, Reservable: true, CreatedAt: s.now()}
		if err := tx.Create(&row).Error; err != nil {
			if db.IsDuplicate(err) {
				return errs.Conflictf("Floating IP %s already exists on network %s.", canon, networkID)
			}
			return err
		}
		f := toFloatingIP(&row)
		out = &f
		return nil
	}, s.txOptions()...)
	return out, err
}

// ListFloatingIPs returns the pool, by creation time then id.
func (s *Service) ListFloatingIPs(ctx context.Context) ([]FloatingIP, error) {
	var rows []models.FloatingIP
	if err := s.db.WithContext(ctx).Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]FloatingIP, len(rows))
	for i := range rows {
		out[i] = toFloatingIP(&rows[i])
	}
	return out, nil
}

// GetFloatingIP returns one floating IP or errs.NotFound.
func (s *Service) GetFloatingIP(ctx context.Context, id string) (*FloatingIP, error) {
	var rows []models.FloatingIP
	if err := s.db.WithContext(ctx).Where("id = ?", id).Limit(1).Find(&rows).Error; err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fipNotFound(id)
	}
	f := toFloatingIP(&rows[0])
	return &f, nil
}

// DeleteFloatingIP removes an address from the pool (errs.Conflict while
// reserved).
func (s *Service) DeleteFloatingIP(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&models.FloatingIP{}).Where("id = ?", id).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return fipNotFound(id)
		}
		reserved, err := s.floatingIPReservedTx(ctx, tx, id)
		if err != nil {
			return err
		}
		if reserved {
			return errs.Conflictf("Cannot delete floating IP %s: it is reserved.", id)
		}
		return tx.Exec("DELETE FROM floatingips WHERE id = ?", id).Error
	}, s.txOptions()...)
}
