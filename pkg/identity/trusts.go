package identity

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/trusts"

	"github.com/leasehold/leasehold/pkg/errs"
)

// Lease trusts. A lease made with a Keystone token carries a trust from
// its creator (trustor) to the service user of [keystone_authtoken]
// (trustee), for the lease's project and the creator's roles on it. The
// calls made later for that project (its server groups) log in as the
// service user scoped to the trust, so what they make belongs to the
// project rather than to the service's own.
//
// The trust impersonates the trustor: a token of the trust then names
// the trustor as its user. That is what lets the service revoke the
// trust at the lease's end without an admin role (Keystone's
// identity:delete_trust is admin or trustor), and it makes the
// project's server groups look made by the lease's creator.

// maxTrustClients bounds the trust-scoped logins kept (least recently
// used dropped first); each is one Keystone token.
const maxTrustClients = 256

// ErrTrustGone is the error of a trust-scoped login whose trust no
// longer exists (deleted or expired): retrying cannot help.
var ErrTrustGone = errors.New("the lease's Keystone trust no longer exists")

// trustClients caches the trust-scoped logins by trust id. gophercloud
// logs in again by itself when Keystone answers 401 to an expired token
// (AllowReauth), so an entry lives until it is evicted or its trust is
// deleted.
type trustClients struct {
	mu    sync.Mutex
	ll    *list.List // of *trustClient, front = most recently used
	items map[string]*list.Element
}

type trustClient struct {
	id string
	pc *gophercloud.ProviderClient
}

func (c *trustClients) get(id string) *gophercloud.ProviderClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[id]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*trustClient).pc
	}
	return nil
}

func (c *trustClients) put(id string, pc *gophercloud.ProviderClient) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.items == nil {
		c.ll, c.items = list.New(), map[string]*list.Element{}
	}
	if el, ok := c.items[id]; ok {
		el.Value.(*trustClient).pc = pc
		c.ll.MoveToFront(el)
		return
	}
	c.items[id] = c.ll.PushFront(&trustClient{id: id, pc: pc})
	for c.ll.Len() > maxTrustClients {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*trustClient).id)
	}
}

func (c *trustClients) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[id]; ok {
		c.ll.Remove(el)
		delete(c.items, id)
	}
}

func (c *trustClients) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// TrustClients is the number of trust-scoped logins cached (for tests).
func (k *Keystone) TrustClients() int { return k.trusts.len() }

// CreateTrust makes the trust of a new lease with the caller's token:
// trustor userID, trustee the service user, project projectID, the
// caller's roles, impersonation. It returns the trust's id. Keystone
// unreachable or failing is errs.Unavailable; a token Keystone no longer
// accepts is errs.Unauthorized; a refusal of the trust itself is
// errs.Forbidden.
func (k *Keystone) CreateTrust(ctx context.Context, token, userID, projectID string, roles []string) (string, error) {
	if token == "" || userID == "" || projectID == "" {
		return "", errs.Forbiddenf("A lease needs a project-scoped token: its Keystone trust is made for the token's project.")
	}
	sc, trustee, err := k.serviceClient(ctx)
	if err != nil {
		return "", err
	}
	opts := trusts.CreateOpts{TrustorUserID: userID, TrusteeUserID: trustee, ProjectID: projectID, Impersonation: true}
	for _, r := range roles {
		opts.Roles = append(opts.Roles, trusts.Role{Name: r})
	}
	tr, err := trusts.Create(ctx, k.asCaller(sc, token), opts).Extract()
	if err != nil {
		return "", k.trustError(ctx, "create the lease's trust", err)
	}
	if tr.ID == "" {
		return "", errs.Unavailablef("Keystone made the lease's trust without an id.")
	}
	return tr.ID, nil
}

// DeleteTrustAsCaller deletes trust id with the trustor's own token (the
// lease it was made for could not be written). A trust already gone is
// done.
func (k *Keystone) DeleteTrustAsCaller(ctx context.Context, token, id string) error {
	sc, _, err := k.serviceClient(ctx)
	if err != nil {
		return err
	}
	err = trusts.Delete(ctx, k.asCaller(sc, token), id).ExtractErr()
	if err != nil && statusOf(err) != http.StatusNotFound {
		return k.trustError(ctx, "delete trust "+id, err)
	}
	k.trusts.drop(id)
	return nil
}

// DeleteTrust deletes the trust of a lease that ended or was deleted,
// logged in with the trust itself (an impersonating token is the
// trustor's, which Keystone lets delete its trust). A trust already gone
// is done, so the call can be repeated.
func (k *Keystone) DeleteTrust(ctx context.Context, id string) error {
	pc, err := k.TrustProvider(ctx, id)
	if errors.Is(err, ErrTrustGone) {
		return nil
	}
	if err != nil {
		return err
	}
	sc, _, err := k.serviceClient(ctx)
	if err != nil {
		return err
	}
	tc := &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: sc.Endpoint, Type: sc.Type}
	err = trusts.Delete(ctx, tc, id).ExtractErr()
	if err != nil && statusOf(err) != http.StatusNotFound {
		if k.trustGone(ctx, id) {
			err = nil
		} else {
			return k.trustError(ctx, "delete trust "+id, err)
		}
	}
	k.trusts.drop(id)
	return nil
}

// TrustProvider returns a provider client logged in as the service user
// scoped to trust id (cached per trust; gophercloud logs in again when
// its token expires). ErrTrustGone (wrapped) when the trust no longer
// exists; errs.Unavailable when Keystone cannot be reached.
func (k *Keystone) TrustProvider(ctx context.Context, id string) (*gophercloud.ProviderClient, error) {
	if pc := k.trusts.get(id); pc != nil {
		return pc, nil
	}
	c := k.cfg
	pc, err := openstack.NewClient(c.AuthURL)
	if err != nil {
		return nil, err
	}
	pc.HTTPClient = *k.http
	opts := gophercloud.AuthOptions{
		IdentityEndpoint: c.AuthURL, Username: c.Username, Password: c.Password,
		DomainName: c.UserDomainName, DomainID: c.UserDomainID, AllowReauth: true,
		Scope: &gophercloud.AuthScope{TrustID: id},
	}
	if opts.DomainID != "" {
		opts.DomainName = ""
	}
	if err := openstack.Authenticate(ctx, pc, opts); err != nil {
		if st := statusOf(err); (st == http.StatusNotFound || st == http.StatusUnauthorized || st == http.StatusForbidden) && k.trustGone(ctx, id) {
			return nil, fmt.Errorf("trust %s: %w", id, ErrTrustGone)
		}
		return nil, k.trustError(ctx, "log in with trust "+id, err)
	}
	k.trusts.put(id, pc)
	return pc, nil
}

// trustGone reports whether Keystone says trust id does not exist (the
// trustee may read its trusts). Any other answer is false.
func (k *Keystone) trustGone(ctx context.Context, id string) bool {
	sc, _, err := k.serviceClient(ctx)
	if err != nil {
		return false
	}
	_, err = trusts.Get(ctx, sc, id).Extract()
	return err != nil && statusOf(err) == http.StatusNotFound
}

// serviceClient is the service user's identity client and user id.
func (k *Keystone) serviceClient(ctx context.Context) (*gophercloud.ServiceClient, string, error) {
	sc, err := k.client(ctx)
	if err != nil {
		k.log.ErrorContext(ctx, "the Keystone service user cannot log in; answering 503", "auth_url", k.cfg.AuthURL, "username", k.cfg.Username, "err", err)
		return nil, "", errs.Wrap(errs.Unavailable, err, "The identity service is unavailable; try again later.")
	}
	k.mu.Lock()
	uid := k.svcUserID
	k.mu.Unlock()
	if uid == "" {
		return nil, "", errs.Unavailablef("The identity service did not name the service user of the login.")
	}
	return sc, uid, nil
}

// asCaller is the identity endpoint of sc called with the caller's
// token, never the service's (no re-login: a refused token is the
// caller's problem).
func (k *Keystone) asCaller(sc *gophercloud.ServiceClient, token string) *gophercloud.ServiceClient {
	pc := &gophercloud.ProviderClient{HTTPClient: *k.http, UserAgent: sc.UserAgent}
	pc.SetToken(token)
	return &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: sc.Endpoint, Type: sc.Type}
}

// trustError maps a failed trust call: 401 is the caller's token
// (Unauthorized), 403 Keystone's refusal (Forbidden), anything else an
// outage (Unavailable).
func (k *Keystone) trustError(ctx context.Context, what string, err error) error {
	switch st := statusOf(err); st {
	case http.StatusUnauthorized:
		return errs.Wrap(errs.Unauthorized, err, MsgUnauthorized)
	case http.StatusForbidden:
		return errs.Wrap(errs.Forbidden, err, "Keystone refused to %s.", what)
	default:
		k.log.WarnContext(ctx, "Keystone trust call failed", "call", what, "status", st, "err", err)
		return errs.Wrap(errs.Unavailable, err, "The identity service could not %s; try again later.", what)
	}
}

// serviceUserID is the user id in the service login's token.
func serviceUserID(pc *gophercloud.ProviderClient) (string, error) {
	res, ok := pc.GetAuthResult().(tokens.CreateResult)
	if !ok {
		return "", fmt.Errorf("unexpected login result %T", pc.GetAuthResult())
	}
	u, err := res.ExtractUser()
	if err != nil {
		return "", err
	}
	return u.ID, nil
}
