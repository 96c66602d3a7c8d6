// Package novatest starts the real Nova the tests under tests/ run
// against (../shared/reference/openstack-harness's nova-box.sh: Nova's
// API, conductor, scheduler and fake-driver computes in one process, with
// chosen scheduler filters, configuration overrides and PYTHONPATH) and
// talks to its compute API: boot a server and wait for it to settle,
// list aggregates, read a server's host. SHARED_DIR names the folder
// holding reference/openstack-harness (default: ../shared next to the
// checkout), as for kstest.
//
// nova-box keeps its state in memory: Down loses it. Pause and Resume
// freeze and thaw the process instead (SIGSTOP/SIGCONT), which is how a
// test makes Nova unreachable without forgetting its aggregates: calls
// made meanwhile hang until the caller's timeout, as they would against
// a Nova that stopped answering.
package novatest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/tests/internal/kstest"
)

// Microversion is the compute API microversion of every call made here
// (2.37+ for "networks": "none"; below 2.88, hypervisor details need no
// RPC to the computes).
const Microversion = "2.79"

// BlazarFilter is the class path of the upstream BlazarFilter, found on
// PYTHONPATH=BlazarNovaDir().
const BlazarFilter = "blazarnova.scheduler.filters.blazar_filter.BlazarFilter"

// BlazarNovaDir is the upstream blazar-nova checkout (SHARED_DIR/vendor),
// for PYTHONPATH.
func BlazarNovaDir() string { return filepath.Join(kstest.SharedDir(), "vendor", "blazar-nova") }

// Missing says why nova-box cannot run here ("" when it can): the
// Python packages it needs (nova-box.sh would otherwise try apt-get).
func Missing() string {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		return "/usr/bin/python3 is missing"
	}
	out, err := exec.Command("/usr/bin/python3", "-c", "import nova, placement, oslotest, wsgi_intercept").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("python3-nova, python3-placement, python3-oslotest or python3-wsgi-intercept is not installed (scripts/deps.sh installs them): %s",
			strings.TrimSpace(lastLine(string(out))))
	}
	if _, err := os.Stat(filepath.Join(kstest.HarnessDir(), "nova-box.sh")); err != nil {
		return "nova-box.sh not found under " + kstest.HarnessDir() + " (set SHARED_DIR)"
	}
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Options choose how nova-box runs.
type Options struct {
	// Keystone, when set, makes Nova validate tokens with it and
	// registers Nova as "compute" in its catalog; otherwise Nova runs
	// with noauth2 (token "user:project", NoAuthAdmin).
	Keystone *kstest.Keystone
	// Hosts are the fake computes (default compute1 compute2).
	Hosts []string
	// Filters are extra scheduler filter classes (module.Class), added
	// to the enabled filters.
	Filters []string
	// Conf is extra nova.conf text ([section] key = value), applied as
	// overrides.
	Conf string
	// PythonPath is prepended to PYTHONPATH (where Filters live).
	PythonPath []string
	// Timeout bounds the start (default 3 minutes).
	Timeout time.Duration
}

// NoAuthAdmin is the admin token of a noauth2 Nova.
const NoAuthAdmin = "admin:admin"

// Nova is a running nova-box.
type Nova struct {
	URL, Dir      string
	Image, Net    string
	PID           int
	Hosts         []string
	HTTP          *http.Client
	paused        bool
	startDuration time.Duration
}

// Start runs nova-box.sh. The Nova is returned whenever its directory
// is known, also with an error, so the caller can stop it.
func Start(ctx context.Context, o Options) (*Nova, error) {
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Minute
	}
	if len(o.Hosts) == 0 {
		o.Hosts = []string{"compute1", "compute2"}
	}
	dir, err := os.MkdirTemp("", "novabox.")
	if err != nil {
		return nil, err
	}
	n := &Nova{Dir: dir, Hosts: o.Hosts, HTTP: &http.Client{Timeout: 30 * time.Second}}
	env := append(os.Environ(), "NOVA_DIR="+dir, "NOVA_HOSTS="+strings.Join(o.Hosts, " "))
	if o.Keystone != nil {
		env = append(env, "KS_DIR="+o.Keystone.Dir)
	}
	if len(o.Filters) > 0 {
		env = append(env, "NOVA_BOX_FILTERS="+strings.Join(o.Filters, ","))
	}
	if o.Conf != "" {
		p := filepath.Join(dir, "extra.conf")
		if err := os.WriteFile(p, []byte(o.Conf), 0o600); err != nil {
			return n, err
		}
		env = append(env, "NOVA_BOX_CONF="+p)
	}
	if len(o.PythonPath) > 0 {
		pp := strings.Join(o.PythonPath, string(os.PathListSeparator))
		if old := os.Getenv("PYTHONPATH"); old != "" {
			pp += string(os.PathListSeparator) + old
		}
		env = append(env, "PYTHONPATH="+pp)
	}
	sctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	t0 := time.Now()
	cmd := exec.CommandContext(sctx, filepath.Join(kstest.HarnessDir(), "nova-box.sh"))
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	n.startDuration = time.Since(t0)
	if b, rerr := os.ReadFile(filepath.Join(dir, "box.pid")); rerr == nil {
		n.PID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if err != nil {
		boxErr, _ := os.ReadFile(filepath.Join(dir, "box.err"))
		return n, fmt.Errorf("nova-box.sh: %v\n%s\n%s", err, stderr.String(), tail(string(boxErr), 3000))
	}
	_ = out
	vars := map[string]string{}
	if err := kstest.ReadVars(filepath.Join(dir, "env.sh"), vars); err != nil {
		return n, err
	}
	n.URL, n.Image, n.Net = vars["NOVA_URL"], vars["NOVA_IMAGE"], vars["NOVA_NETWORK"]
	if n.URL == "" || n.Image == "" {
		return n, fmt.Errorf("nova-box.sh wrote no NOVA_URL/NOVA_IMAGE in %s/env.sh", dir)
	}
	return n, nil
}

// StartDuration is how long Start took.
func (n *Nova) StartDuration() time.Duration { return n.startDuration }

func tail(s string, max int) string {
	if len(s) > max {
		return "…" + s[len(s)-max:]
	}
	return s
}

// Down stops nova-box and removes its directory (its log too; LogTail
// reads it before).
func (n *Nova) Down() error {
	if n.paused {
		_ = n.Resume()
	}
	out, err := exec.Command(filepath.Join(kstest.HarnessDir(), "nova-down.sh"), n.Dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("nova-down.sh: %v\n%s", err, out)
	}
	return nil
}

// LogTail is the end of nova-box's stderr (its log), for a failure message.
func (n *Nova) LogTail(max int) string {
	b, _ := os.ReadFile(filepath.Join(n.Dir, "box.err"))
	return tail(string(b), max)
}

// Pause freezes the nova-box process (SIGSTOP): connections are
// accepted by the kernel but nothing answers.
func (n *Nova) Pause() error {
	if n.PID <= 0 {
		return errors.New("novatest: no nova-box pid")
	}
	if err := syscall.Kill(n.PID, syscall.SIGSTOP); err != nil {
		return err
	}
	n.paused = true
	return nil
}

// Resume thaws a paused nova-box (SIGCONT).
func (n *Nova) Resume() error {
	if n.PID <= 0 {
		return errors.New("novatest: no nova-box pid")
	}
	if err := syscall.Kill(n.PID, syscall.SIGCONT); err != nil {
		return err
	}
	n.paused = false
	return nil
}

// Error is a compute API answer outside 2xx.
type Error struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *Error) Error() string {
	return fmt.Sprintf("nova %s %s: %d %s", e.Method, e.Path, e.Status, tail(e.Body, 600))
}

// StatusOf is the HTTP status of a Nova answer error (0 if err is not one).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Call makes one compute API call (path below /v2.1) as token tok at
// Microversion, decoding a JSON answer into out when it is not nil.
func (n *Nova) Call(ctx context.Context, method, path, tok string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.URL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Auth-Token", tok)
	req.Header.Set("OpenStack-API-Version", "compute "+Microversion)
	resp, err := n.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return &Error{Method: method, Path: path, Status: resp.StatusCode, Body: string(b)}
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Boot asks for one server of flavor (id) named name, with scheduler
// hints (nil for none), and returns its id without waiting.
func (n *Nova) Boot(ctx context.Context, tok, name, flavor string, hints map[string]any) (string, error) {
	return n.boot(ctx, tok, name, flavor, "", hints)
}

// BootOn boots a server on host, past the scheduler's filters (Nova's
// forced host, availability_zone "nova:<host>": an admin token), and
// returns its id without waiting.
func (n *Nova) BootOn(ctx context.Context, adminTok, name, flavor, host string) (string, error) {
	return n.boot(ctx, adminTok, name, flavor, "nova:"+host, nil)
}

func (n *Nova) boot(ctx context.Context, tok, name, flavor, az string, hints map[string]any) (string, error) {
	server := map[string]any{"name": name, "imageRef": n.Image, "flavorRef": flavor, "networks": "none"}
	if az != "" {
		server["availability_zone"] = az
	}
	body := map[string]any{"server": server}
	if len(hints) > 0 {
		body["os:scheduler_hints"] = hints
	}
	var out struct {
		Server struct {
			ID string `json:"id"`
		} `json:"server"`
	}
	if err := n.Call(ctx, "POST", "/servers", tok, body, &out); err != nil {
		return "", err
	}
	return out.Server.ID, nil
}

// Server is what these tests read of a server. Host needs an admin token.
type Server struct {
	ID        string
	Name      string
	Status    string
	ProjectID string
	Host      string
	Fault     string
}

// GetServer reads one server; a missing one is an *Error with Status 404.
func (n *Nova) GetServer(ctx context.Context, tok, id string) (Server, error) {
	var out struct {
		Server struct {
			ID       string `json:"id"`
			Name     string `json:"name"`
			Status   string `json:"status"`
			TenantID string `json:"tenant_id"`
			Host     string `json:"OS-EXT-SRV-ATTR:host"`
			Fault    *struct {
				Message string `json:"message"`
			} `json:"fault"`
		} `json:"server"`
	}
	if err := n.Call(ctx, "GET", "/servers/"+id, tok, nil, &out); err != nil {
		return Server{}, err
	}
	s := Server{ID: out.Server.ID, Name: out.Server.Name, Status: out.Server.Status, ProjectID: out.Server.TenantID, Host: out.Server.Host}
	if out.Server.Fault != nil {
		s.Fault = out.Server.Fault.Message
	}
	return s, nil
}

// ServerHost is the compute host of server id (admin token).
func (n *Nova) ServerHost(ctx context.Context, adminTok, id string) (string, error) {
	s, err := n.GetServer(ctx, adminTok, id)
	return s.Host, err
}

// WaitServer polls server id until it is ACTIVE or ERROR (returned
// without error either way), failing after timeout.
func (n *Nova) WaitServer(ctx context.Context, tok, id string, timeout time.Duration) (Server, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last Server
	for {
		s, err := n.GetServer(ctx, tok, id)
		if err == nil {
			last = s
			if s.Status == "ACTIVE" || s.Status == "ERROR" {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("server %s not ACTIVE or ERROR after %s (last status %q, last error %v)", id, timeout, last.Status, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// BootAndWait is Boot then WaitServer.
func (n *Nova) BootAndWait(ctx context.Context, tok, name, flavor string, hints map[string]any, timeout time.Duration) (Server, error) {
	id, err := n.Boot(ctx, tok, name, flavor, hints)
	if err != nil {
		return Server{}, err
	}
	return n.WaitServer(ctx, tok, id, timeout)
}

// WaitGone polls until server id is deleted (404), failing after timeout.
func (n *Nova) WaitGone(ctx context.Context, tok, id string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		_, err := n.GetServer(ctx, tok, id)
		if StatusOf(err) == http.StatusNotFound {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server %s still there after %s (last error %v)", id, timeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// DeleteServer deletes server id (a missing one is no error).
func (n *Nova) DeleteServer(ctx context.Context, tok, id string) error {
	err := n.Call(ctx, "DELETE", "/servers/"+id, tok, nil, nil)
	if StatusOf(err) == http.StatusNotFound {
		return nil
	}
	return err
}

// Servers lists the servers of every project (admin token) with their
// hosts.
func (n *Nova) Servers(ctx context.Context, adminTok string) ([]Server, error) {
	var out struct {
		Servers []struct {
			ID       string `json:"id"`
			Name     string `json:"name"`
			Status   string `json:"status"`
			TenantID string `json:"tenant_id"`
			Host     string `json:"OS-EXT-SRV-ATTR:host"`
		} `json:"servers"`
	}
	if err := n.Call(ctx, "GET", "/servers/detail?all_tenants=1", adminTok, nil, &out); err != nil {
		return nil, err
	}
	ss := make([]Server, len(out.Servers))
	for i, s := range out.Servers {
		ss[i] = Server{ID: s.ID, Name: s.Name, Status: s.Status, ProjectID: s.TenantID, Host: s.Host}
	}
	return ss, nil
}

// Aggregate is a Nova host aggregate.
type Aggregate struct {
	ID               int               `json:"id"`
	Name             string            `json:"name"`
	AvailabilityZone string            `json:"availability_zone"`
	Hosts            []string          `json:"hosts"`
	Metadata         map[string]string `json:"metadata"`
}

// Aggregates lists the aggregates (admin token).
func (n *Nova) Aggregates(ctx context.Context, adminTok string) ([]Aggregate, error) {
	var out struct {
		Aggregates []Aggregate `json:"aggregates"`
	}
	if err := n.Call(ctx, "GET", "/os-aggregates", adminTok, nil, &out); err != nil {
		return nil, err
	}
	return out.Aggregates, nil
}

// AggregateNamed is the aggregate named name among Aggregates, and how
// many aggregates have that name (Nova refuses duplicates; a count
// above one is a bug worth reporting).
func (n *Nova) AggregateNamed(ctx context.Context, adminTok, name string) (*Aggregate, int, error) {
	all, err := n.Aggregates(ctx, adminTok)
	if err != nil {
		return nil, 0, err
	}
	var found *Aggregate
	count := 0
	for i := range all {
		if all[i].Name == name {
			count++
			if found == nil {
				found = &all[i]
			}
		}
	}
	return found, count, nil
}

// WaitAggregate polls the aggregates until ok accepts them, failing
// after timeout with the last listing; then it resyncs the scheduler.
func (n *Nova) WaitAggregate(ctx context.Context, adminTok string, timeout time.Duration, ok func([]Aggregate) bool) ([]Aggregate, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last []Aggregate
	var lastErr error
	for {
		all, err := n.Aggregates(ctx, adminTok)
		if err == nil {
			last = all
			if ok(all) {
				// What the test goes on to do may run through the
				// scheduler, which must see these aggregates too.
				return all, n.ResyncScheduler(ctx, adminTok)
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			b, _ := json.Marshal(last)
			return last, fmt.Errorf("aggregates not as expected after %s: %s (last error %v)", timeout, b, lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ResyncScheduler makes Nova's scheduler re-read every aggregate.
// Nova tells its scheduler of an aggregate change by a fanout cast that
// carries the aggregate as it was, and the scheduler applies casts in
// whatever order its workers take them: two host removals in a row can
// leave it believing the first removal's state for good (a host still
// in the freepool, say, which the BlazarFilter then refuses). Setting
// and removing a metadata key sends the current state twice; both
// casts hold the same hosts, so their order does not matter.
func (n *Nova) ResyncScheduler(ctx context.Context, adminTok string) error {
	all, err := n.Aggregates(ctx, adminTok)
	if err != nil {
		return err
	}
	const key = "leasehold-test-resync"
	for _, a := range all {
		for _, v := range []any{"1", nil} {
			body := map[string]any{"set_metadata": map[string]any{"metadata": map[string]any{key: v}}}
			if err := n.Call(ctx, "POST", fmt.Sprintf("/os-aggregates/%d/action", a.ID), adminTok, body, nil); err != nil {
				return fmt.Errorf("resync aggregate %s: %w", a.Name, err)
			}
		}
	}
	return nil
}

// HasHost reports whether aggregate a holds host.
func (a *Aggregate) HasHost(host string) bool {
	if a == nil {
		return false
	}
	for _, h := range a.Hosts {
		if h == host {
			return true
		}
	}
	return false
}

// Hypervisor is one os-hypervisors/detail entry.
type Hypervisor struct {
	ID       string `json:"id"`
	Hostname string `json:"hypervisor_hostname"`
	State    string `json:"state"`
	Status   string `json:"status"`
	Service  struct {
		Host string `json:"host"`
	} `json:"service"`
}

// Hypervisors lists the hypervisors (admin token).
func (n *Nova) Hypervisors(ctx context.Context, adminTok string) ([]Hypervisor, error) {
	var out struct {
		Hypervisors []Hypervisor `json:"hypervisors"`
	}
	err := n.Call(ctx, "GET", "/os-hypervisors/detail", adminTok, nil, &out)
	return out.Hypervisors, err
}

// NextMinute is the Blazar lease date (minutes) of the first whole
// minute at least lead from now.
func NextMinute(lead time.Duration) string {
	return time.Now().UTC().Add(lead).Truncate(time.Minute).Add(time.Minute).Format("2006-01-02 15:04")
}

// Membership names the aggregates that hold host.
func Membership(aggs []Aggregate, host string) []string {
	var in []string
	for _, a := range aggs {
		if a.HasHost(host) {
			in = append(in, a.Name)
		}
	}
	return in
}

// CountNamed is how many aggregates are named name.
func CountNamed(aggs []Aggregate, name string) int {
	n := 0
	for _, a := range aggs {
		if a.Name == name {
			n++
		}
	}
	return n
}
