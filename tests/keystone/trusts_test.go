package keystone_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/identity"
	"github.com/leasehold/leasehold/pkg/server"
)

// keystoneTrust is a trust as Keystone's admin reads it back.
type keystoneTrust struct {
	TrustorUserID string `json:"trustor_user_id"`
	TrusteeUserID string `json:"trustee_user_id"`
	ProjectID     string `json:"project_id"`
	Impersonation bool   `json:"impersonation"`
	Roles         []struct {
		Name string `json:"name"`
	} `json:"roles"`
}

// getTrust reads trust id as Keystone's admin: the trust, or the HTTP
// status of the refusal (404 once it is deleted).
func getTrust(t *testing.T, k *Keystone, id string) (keystoneTrust, int) {
	t.Helper()
	admin := k.MustIssue(t, "admin", k.AdminPassword, "admin")
	r, _ := http.NewRequest("GET", k.URL+"/OS-TRUST/trusts/"+id, nil)
	r.Header.Set("X-Auth-Token", admin)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Trust keystoneTrust `json:"trust"`
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
	}
	return body.Trust, resp.StatusCode
}

// tokenRoles are the role names of tok, as Keystone validates it.
func tokenRoles(t *testing.T, k *Keystone, tok string) []string {
	t.Helper()
	admin := k.MustIssue(t, "admin", k.AdminPassword, "admin")
	r, _ := http.NewRequest("GET", k.URL+"/auth/tokens?nocatalog", nil)
	r.Header.Set("X-Auth-Token", admin)
	r.Header.Set("X-Subject-Token", tok)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Token struct {
			Roles []struct{ Name string } `json:"roles"`
		} `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range body.Token.Roles {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}

func send(h http.Handler, method, path, tok, body string) (int, string) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if tok != "" {
		r.Header.Set("X-Auth-Token", tok)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Code, rec.Body.String()
}

// leaseBody is a lease without reservations a day from now.
func leaseBody(name string) string {
	start := time.Now().UTC().Add(24 * time.Hour)
	return `{"name":"` + name + `","start_date":"` + start.Format("2006-01-02 15:04") + `","end_date":"` +
		start.Add(time.Hour).Format("2006-01-02 15:04") + `","reservations":[],"events":[]}`
}

type leaseAnswer struct {
	Lease struct {
		ID        string  `json:"id"`
		ProjectID string  `json:"project_id"`
		TrustID   *string `json:"trust_id"`
	} `json:"lease"`
}

// TestLeaseTrust: a member's lease carries a Keystone trust from the
// member to the service user, for the member's project, with the
// member's roles, impersonating; show answers its id; deleting the
// lease revokes it (the outbox action), and running the action again
// is harmless.
func TestLeaseTrust(t *testing.T) {
	k := RequireKeystone(t)
	s := newServerConf(t, k, "")
	h := s.Handler()
	demo := k.MustIssue(t, "demo", k.DemoPassword, "demo")

	code, body := send(h, "POST", "/v1/leases", demo, leaseBody("trusted"))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var created leaseAnswer
	if err := json.Unmarshal([]byte(body), &created); err != nil {
		t.Fatal(err)
	}
	if created.Lease.TrustID == nil || *created.Lease.TrustID == "" {
		t.Fatalf("create answered trust_id null: %s", body)
	}
	trustID := *created.Lease.TrustID
	code, body = send(h, "GET", "/v1/leases/"+created.Lease.ID, demo, "")
	var shown leaseAnswer
	if err := json.Unmarshal([]byte(body), &shown); code != http.StatusOK || err != nil || shown.Lease.TrustID == nil || *shown.Lease.TrustID != trustID {
		t.Fatalf("show: %d %s, want trust_id %s", code, body, trustID)
	}

	tr, status := getTrust(t, k, trustID)
	if status != http.StatusOK {
		t.Fatalf("GET trust %s as admin: %d", trustID, status)
	}
	var roles []string
	for _, r := range tr.Roles {
		roles = append(roles, r.Name)
	}
	slices.Sort(roles)
	want := keystoneTrust{TrustorUserID: k.DemoUserID, TrusteeUserID: k.ServiceUserID, ProjectID: k.DemoProjectID, Impersonation: true}
	got := tr
	got.Roles = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trust (-want +got):\n%s", diff)
	}
	if wantRoles := tokenRoles(t, k, demo); !cmp.Equal(roles, wantRoles) || !slices.Contains(roles, "member") {
		t.Errorf("trust roles %v, want the member's token roles %v", roles, wantRoles)
	}

	if code, body := send(h, "DELETE", "/v1/leases/"+created.Lease.ID, demo, ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	// The trust is revoked by the outbox, after the commit.
	if _, status := getTrust(t, k, trustID); status != http.StatusOK {
		t.Fatalf("trust gone before the outbox ran: %d", status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if n, err := s.Outbox.RunDue(ctx); n != 1 || err != nil {
		t.Fatalf("outbox: %d actions, %v; want the trust's deletion", n, err)
	}
	if _, status := getTrust(t, k, trustID); status != http.StatusNotFound {
		t.Errorf("trust after the lease's deletion: %d, want 404", status)
	}
	var left int64
	if err := s.DB().DB.Model(&models.OutboxAction{}).Count(&left).Error; err != nil || left != 0 {
		t.Errorf("outbox rows left: %d, %v", left, err)
	}
}

// TestTrustCalls: the trust calls the outbox makes, against Keystone: a
// trust-scoped login is the trustor's in the lease's project
// (impersonation), deleting the trust twice is done twice (404 = done),
// and a login with a deleted trust is ErrTrustGone.
func TestTrustCalls(t *testing.T) {
	k := RequireKeystone(t)
	v, _, _ := validator(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	demo := k.MustIssue(t, "demo", k.DemoPassword, "demo")
	id, err := v.Validate(ctx, demo)
	if err != nil {
		t.Fatal(err)
	}
	trustID, err := v.CreateTrust(ctx, demo, id.UserID, id.ProjectID, id.Roles)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := v.TrustProvider(ctx, trustID)
	if err != nil {
		t.Fatal(err)
	}
	scoped, err := v.Validate(ctx, pc.Token())
	if err != nil {
		t.Fatal(err)
	}
	if scoped.UserID != k.DemoUserID || scoped.ProjectID != k.DemoProjectID {
		t.Errorf("trust-scoped token is user %s project %s, want the trustor %s in %s", scoped.UserID, scoped.ProjectID, k.DemoUserID, k.DemoProjectID)
	}
	if again, err := v.TrustProvider(ctx, trustID); err != nil || again != pc || v.TrustClients() != 1 {
		t.Errorf("second login: %p %v (%d cached), want the cached %p", again, err, v.TrustClients(), pc)
	}
	for i := range 2 {
		if err := v.DeleteTrust(ctx, trustID); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
	}
	if _, status := getTrust(t, k, trustID); status != http.StatusNotFound {
		t.Errorf("trust after the deletion: %d, want 404", status)
	}
	if v.TrustClients() != 0 {
		t.Errorf("%d trust logins cached after the deletion, want 0", v.TrustClients())
	}
	if _, err := v.TrustProvider(ctx, trustID); !errors.Is(err, identity.ErrTrustGone) {
		t.Errorf("login with a deleted trust: %v, want ErrTrustGone", err)
	}
}

// TestLeaseTrustKeystoneDown: with the member's token cached but
// Keystone stopped, creating a lease answers Blazar's 503 (the trust
// cannot be made) and stores nothing.
func TestLeaseTrustKeystoneDown(t *testing.T) {
	k := RequireKeystone(t)
	dir := t.TempDir()
	// A long token cache: the token stays valid while Keystone is down.
	conf := strings.Replace(keystoneConf(k, dir, ""), "token_cache_time = 5", "token_cache_time = 600", 1)
	s, err := server.New(context.Background(), loadConfig(t, dir, conf))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.DB().Close() })
	h := s.Handler()
	demo := k.MustIssue(t, "demo", k.DemoPassword, "demo")
	if code, body := send(h, "GET", "/v1/leases", demo, ""); code != http.StatusOK {
		t.Fatalf("list: %d %s", code, body)
	}
	k.Stop(t)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			k.Start(t)
		}
	})
	code, body := send(h, "POST", "/v1/leases", demo, leaseBody("no-keystone"))
	if code != http.StatusServiceUnavailable || !strings.Contains(strings.ReplaceAll(body, " ", ""), `"error_code":503`) {
		t.Errorf("create with Keystone down: %d %s, want Blazar's 503", code, body)
	}
	var leases, actions int64
	if err := s.DB().DB.Model(&models.Lease{}).Count(&leases).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.DB().DB.Model(&models.OutboxAction{}).Count(&actions).Error; err != nil {
		t.Fatal(err)
	}
	if leases != 0 || actions != 0 {
		t.Errorf("with Keystone down: %d leases, %d outbox rows stored, want none", leases, actions)
	}
	k.Start(t)
	restarted = true
	if code, body := send(h, "POST", "/v1/leases", demo, leaseBody("keystone-back")); code != http.StatusCreated || !strings.Contains(body, `"trust_id": "`) && !strings.Contains(body, `"trust_id":"`) {
		t.Errorf("create after Keystone's restart: %d %s", code, body)
	}
}

// TestNoAuthLeaseHasNoTrust: in noauth no trust is made.
func TestNoAuthLeaseHasNoTrust(t *testing.T) {
	dir := t.TempDir()
	conf := "[api]\nauth_strategy = noauth\n[database]\nconnection = sqlite:///" + filepath.Join(dir, "lh.db") + "\n"
	s, err := server.New(context.Background(), loadConfig(t, dir, conf))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.DB().Close() })
	code, body := send(s.Handler(), "POST", "/v1/leases", "demo:p1", leaseBody("untrusted"))
	var created leaseAnswer
	if err := json.Unmarshal([]byte(body), &created); code != http.StatusCreated || err != nil {
		t.Fatalf("create: %d %s", code, body)
	}
	if created.Lease.TrustID != nil {
		t.Errorf("noauth lease has trust_id %q, want null", *created.Lease.TrustID)
	}
}
