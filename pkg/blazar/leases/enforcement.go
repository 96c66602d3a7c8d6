package leases

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/plugins"
)

// EnforcementContext is who asks (sent to the external service).
type EnforcementContext struct {
	UserID     string `json:"user_id"`
	ProjectID  string `json:"project_id"`
	AuthURL    string `json:"auth_url"`
	RegionName string `json:"region_name"`
}

// LeaseValues is a lease as the enforcement filters see it.
type LeaseValues struct {
	ID           string           `json:"id,omitempty"`
	Name         string           `json:"name"`
	ProjectID    string           `json:"project_id"`
	UserID       string           `json:"user_id"`
	StartDate    string           `json:"start_date"`
	EndDate      string           `json:"end_date"`
	Reservations []map[string]any `json:"reservations"`

	start, end time.Time
}

// Filter is one [enforcement] filter.
type Filter interface {
	CheckCreate(ctx context.Context, c EnforcementContext, l LeaseValues) error
	CheckUpdate(ctx context.Context, c EnforcementContext, current, l LeaseValues) error
	OnEnd(ctx context.Context, c EnforcementContext, l LeaseValues) error
}

// NewFilters builds the filters enabled in cfg, in its order.
func NewFilters(cfg config.Enforcement, client *http.Client) []Filter {
	var out []Filter
	for _, name := range cfg.EnabledFilters {
		switch name {
		case "MaxLeaseDurationFilter":
			out = append(out, &MaxLeaseDuration{Max: time.Duration(cfg.MaxLeaseDuration) * time.Second, Exempt: cfg.MaxLeaseDurationExemptProjectIDs})
		case "ExternalServiceFilter":
			ext := &ExternalService{Token: cfg.ExternalServiceToken, Client: client}
			base := cfg.ExternalServiceBaseEndpoint
			if base != "" && !strings.HasSuffix(base, "/") {
				base += "/"
			}
			pick := func(explicit, path string) string {
				if explicit != "" {
					return explicit
				}
				if base != "" {
					return base + path
				}
				return ""
			}
			ext.CreateURL = pick(cfg.ExternalServiceCheckCreateEndpoint, "check-create")
			ext.UpdateURL = pick(cfg.ExternalServiceCheckUpdateEndpoint, "check-update")
			ext.OnEndURL = pick(cfg.ExternalServiceOnEndEndpoint, "on-end")
			out = append(out, ext)
		}
	}
	return out
}

// MaxLeaseDuration refuses leases longer than Max (a negative Max is no
// limit) unless the project is exempt. 403 on create, 400 on update.
type MaxLeaseDuration struct {
	Max    time.Duration
	Exempt []string
}

func (f *MaxLeaseDuration) check(l LeaseValues, kind errs.Kind) error {
	if f.Max < 0 || slices.Contains(f.Exempt, l.ProjectID) {
		return nil
	}
	if d := l.end.Sub(l.start); d > f.Max {
		return errs.New(kind, "Lease duration of %d seconds must be less than or equal to the maximum lease duration of %d seconds.",
			int64(d/time.Second), int64(f.Max/time.Second))
	}
	return nil
}

// CheckCreate implements Filter.
func (f *MaxLeaseDuration) CheckCreate(_ context.Context, _ EnforcementContext, l LeaseValues) error {
	return f.check(l, errs.Forbidden)
}

// CheckUpdate implements Filter.
func (f *MaxLeaseDuration) CheckUpdate(_ context.Context, _ EnforcementContext, _, l LeaseValues) error {
	return f.check(l, errs.BadRequest)
}

// OnEnd implements Filter.
func (f *MaxLeaseDuration) OnEnd(context.Context, EnforcementContext, LeaseValues) error { return nil }

// ExternalService asks an external HTTP service: POST JSON to
// check-create / check-update / on-end; 204 allows, 403 denies with the
// body's "message", anything else denies with a generic message.
type ExternalService struct {
	CreateURL, UpdateURL, OnEndURL string
	Token                          string
	Client                         *http.Client
}

const externalDenied = "External service enforcement filter denied the request."

func (f *ExternalService) post(ctx context.Context, url string, body any) error {
	if url == "" {
		return nil
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return plugins.BadRequest("%s", externalDenied)
	}
	req.Header.Set("Content-Type", "application/json")
	if f.Token != "" {
		req.Header.Set("X-Auth-Token", f.Token)
	}
	client := f.Client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return plugins.BadRequest("%s (%v)", externalDenied, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch resp.StatusCode {
	case http.StatusNoContent:
		return nil
	case http.StatusForbidden:
		var m struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &m) == nil && m.Message != "" {
			return plugins.BadRequest("%s", m.Message)
		}
	}
	return plugins.BadRequest("%s", externalDenied)
}

// CheckCreate implements Filter.
func (f *ExternalService) CheckCreate(ctx context.Context, c EnforcementContext, l LeaseValues) error {
	return f.post(ctx, f.CreateURL, map[string]any{"context": c, "lease": l})
}

// CheckUpdate implements Filter.
func (f *ExternalService) CheckUpdate(ctx context.Context, c EnforcementContext, current, l LeaseValues) error {
	return f.post(ctx, f.UpdateURL, map[string]any{"context": c, "current_lease": current, "lease": l})
}

// OnEnd implements Filter.
func (f *ExternalService) OnEnd(ctx context.Context, c EnforcementContext, l LeaseValues) error {
	return f.post(ctx, f.OnEndURL, map[string]any{"context": c, "lease": l})
}

var (
	_ Filter = (*MaxLeaseDuration)(nil)
	_ Filter = (*ExternalService)(nil)
)

func leaseValues(id, name, project, user string, start, end time.Time, res []map[string]any) LeaseValues {
	if res == nil {
		res = []map[string]any{}
	}
	return LeaseValues{ID: id, Name: name, ProjectID: project, UserID: user,
		StartDate: FormatDate(start), EndDate: FormatDate(end), Reservations: res, start: start, end: end}
}
