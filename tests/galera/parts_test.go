package galera_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const placementVersion = "placement 1.39"

type inventoryDoc struct {
	Generation  int64                     `json:"resource_provider_generation"`
	Inventories map[string]map[string]any `json:"inventories"`
}

// providerGeneration is a provider's generation as process i reads it.
func (r *replicas) providerGeneration(ctx context.Context, i int, uuid string) (int64, error) {
	code, b, err := r.client.Do(ctx, "GET", r.servers[i].URL+"/placement/resource_providers/"+uuid, "", "OpenStack-API-Version", placementVersion)
	if err != nil || code != http.StatusOK {
		return 0, fmt.Errorf("GET provider through %s: %d %v %s", r.servers[i].Name, code, err, b)
	}
	var doc struct {
		Generation int64 `json:"generation"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return 0, err
	}
	return doc.Generation, nil
}

// placementGenerations: rounds of 8 concurrent PUTs of a provider's
// inventories, 4 through each process, all with the generation both
// processes read. Exactly one per round wins (200, generation + 1, its
// total stored); the others get 409 placement.concurrent_update; no
// update is lost (what is stored is the winner's).
func (r *replicas) placementGenerations(t *testing.T) {
	const rounds, writers = 20, 8
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	uuid := "6d0e3c1a-5b0e-4c1e-9a35-000000000001"
	r.client.Must(t, http.StatusOK, "POST", r.servers[0].URL+"/placement/resource_providers",
		fmt.Sprintf(`{"name": "galera-rp", "uuid": %q}`, uuid), "OpenStack-API-Version", placementVersion)
	began := time.Now()
	for round := range rounds {
		// Both nodes have applied the last round's write (Galera applies
		// asynchronously; a process reading an older generation would
		// only be refused, which proves nothing).
		var gen int64
		for deadline := time.Now().Add(20 * time.Second); ; {
			g0, err0 := r.providerGeneration(ctx, 0, uuid)
			g1, err1 := r.providerGeneration(ctx, 1, uuid)
			if err0 == nil && err1 == nil && g0 == g1 {
				gen = g0
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the processes disagree on the generation: %d %v / %d %v", round, g0, err0, g1, err1)
			}
			time.Sleep(20 * time.Millisecond)
		}
		type answer struct {
			code  int
			body  string
			total int
		}
		answers := make([]answer, writers)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for w := range writers {
			total := 1000*(round+1) + w + 1
			wg.Go(func() {
				body := fmt.Sprintf(`{"resource_provider_generation": %d, "inventories": {"VCPU": {"total": %d}}}`, gen, total)
				<-gate
				code, b, err := r.client.Do(ctx, "PUT", r.servers[w%2].URL+"/placement/resource_providers/"+uuid+"/inventories", body, "OpenStack-API-Version", placementVersion)
				if err != nil {
					t.Errorf("round %d writer %d: %v", round, w, err)
				}
				answers[w] = answer{code, string(b), total}
			})
		}
		close(gate)
		wg.Wait()
		winner := -1
		for w, a := range answers {
			r.count(a.code)
			switch {
			case a.code == http.StatusOK:
				if winner >= 0 {
					t.Errorf("round %d: writers %d and %d both won with generation %d (a lost update)", round, winner, w, gen)
				}
				winner = w
			case a.code == http.StatusConflict && strings.Contains(a.body, "placement.concurrent_update"):
			default:
				t.Errorf("round %d writer %d: %d %s; want 200 or 409 placement.concurrent_update", round, w, a.code, a.body)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won with the current generation %d: %+v", round, gen, answers)
		}
		var doc inventoryDoc
		b := r.client.Must(t, http.StatusOK, "GET", r.servers[winner%2].URL+"/placement/resource_providers/"+uuid+"/inventories", "", "OpenStack-API-Version", placementVersion)
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		got, _ := doc.Inventories["VCPU"]["total"].(float64)
		if doc.Generation != gen+1 || int(got) != answers[winner].total {
			t.Fatalf("round %d: stored generation %d total %v; want %d and the winner's %d", round, doc.Generation, got, gen+1, answers[winner].total)
		}
	}
	t.Logf("%d rounds of %d concurrent inventory PUTs with one generation over 2 processes in %s: one 200 and %d 409s each",
		rounds, writers, time.Since(began).Round(time.Millisecond), writers-1)
}

// eventsExactlyOnce: 24 one-host leases seconds long (6 hosts, 4 back
// to back on each), created through both processes, so 48 start and end
// events fall due over about 25 s. Once a third have run, process 0 is
// killed with SIGKILL; process 1 takes back its claims after the claim
// timeout and runs the rest. Triggers (their rows are part of the
// transaction that fired them, replicated with it) record every commit
// that sets an event DONE and every outbox row written: each event must
// be DONE exactly once, and each lease's compute actions recorded
// exactly once.
func (r *replicas) eventsExactlyOnce(t *testing.T, hosts []string) {
	for _, q := range []string{
		`CREATE TABLE lh_test_event_runs (id BIGINT AUTO_INCREMENT PRIMARY KEY, event_id VARCHAR(36) NOT NULL, claimed_by VARCHAR(64) NOT NULL, at DATETIME(6) NOT NULL)`,
		`CREATE TRIGGER lh_test_event_done AFTER UPDATE ON events FOR EACH ROW
			IF NEW.status = 'DONE' AND OLD.status <> 'DONE' THEN
				INSERT INTO lh_test_event_runs (event_id, claimed_by, at) VALUES (NEW.id, NEW.claimed_by, NOW(6));
			END IF`,
		`CREATE TABLE lh_test_outbox_rows (id BIGINT AUTO_INCREMENT PRIMARY KEY, lease_id VARCHAR(36) NOT NULL, kind VARCHAR(128) NOT NULL)`,
		`CREATE TRIGGER lh_test_outbox_insert AFTER INSERT ON outbox FOR EACH ROW
			INSERT INTO lh_test_outbox_rows (lease_id, kind) VALUES (NEW.lease_id, NEW.kind)`,
	} {
		mustExec(t, r.check, q)
	}
	const slots = 4
	base := time.Now().UTC().Add(5 * time.Second).Truncate(time.Second)
	var leaseIDs []string
	for k := range slots {
		start := base.Add(time.Duration(k) * 6 * time.Second)
		for h := range hosts {
			i := k*len(hosts) + h
			b := r.client.Must(t, http.StatusCreated, "POST", r.servers[i%2].URL+"/v1/leases", leaseBody(fmt.Sprintf("soon-%02d", i), start, start.Add(4*time.Second)))
			leaseIDs = append(leaseIDs, leaseID(b))
		}
	}
	// The second slot's leases are locked on nodes 0 and 1 (Galera's row
	// locks are each node's own): the manager of each process that claims
	// one of their start events then waits in it, so process 0 is killed
	// holding a claim.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	slot1 := "'" + strings.Join(leaseIDs[len(hosts):2*len(hosts)], "','") + "'"
	var holds []*sql.Tx
	release := func() {
		for _, tx := range holds {
			_ = tx.Rollback()
		}
		holds = nil
	}
	defer release()
	for _, node := range r.nodes[:2] {
		tx, err := node.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, tx)
		if _, err := tx.ExecContext(ctx, "SELECT id FROM `"+r.dbName+"`.leases WHERE id IN ("+slot1+") FOR UPDATE"); err != nil {
			t.Fatal(err)
		}
	}
	if time.Now().After(base) {
		t.Logf("warning: the leases were created after the first start time (slow machine); the first events ran late")
	}
	in := "'" + strings.Join(leaseIDs, "','") + "'"
	countEvents := func(where string) int {
		var n int
		if err := r.check.QueryRow("SELECT COUNT(*) FROM events WHERE lease_id IN (" + in + ") AND " + where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	total := countEvents("1=1")
	if total != 2*len(leaseIDs) {
		t.Fatalf("%d events for %d leases, want a start and an end each", total, len(leaseIDs))
	}
	// Kill process 0 once it holds a claim of the second slot (bounded:
	// if process 1 claimed them all, the kill still comes mid-run).
	killed := r.servers[0]
	mine := fmt.Sprintf("lease_id IN (%s) AND status = 'IN_PROGRESS' AND claimed_by LIKE '%%-%d-%%'", slot1, killed.Pid())
	deadline := time.Now().Add(60 * time.Second)
	for countEvents(mine) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	var heldByKilled []string
	rows, err := r.check.Query("SELECT id FROM events WHERE lease_id IN (" + in + ") AND " + mine)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		heldByKilled = append(heldByKilled, id)
	}
	rows.Close()
	killed.Signal(t, syscall.SIGKILL)
	killed.Wait(t, 30*time.Second)
	killedAt := time.Now()
	release()
	doneAtKill := countEvents("status = 'DONE'")
	claimedAtKill := countEvents("status = 'IN_PROGRESS'")
	t.Logf("SIGKILLed %s with %d of %d events done, %d claimed, %d of them by it", killed.Name, doneAtKill, total, claimedAtKill, len(heldByKilled))
	if len(heldByKilled) == 0 {
		t.Errorf("%s held no claim when it was killed (process 1 claimed every start of the second slot first)", killed.Name)
	}
	deadline = time.Now().Add(90 * time.Second)
	if doneAtKill == total {
		t.Fatal("every event had run before the kill: it was not mid-run")
	}
	for countEvents("status = 'DONE'") < total {
		if n := countEvents("status = 'ERROR'"); n > 0 {
			t.Fatalf("%d events in ERROR", n)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events done 90 s after the start; %d claimed", countEvents("status = 'DONE'"), total, countEvents("status = 'IN_PROGRESS'"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("all %d events done %s after the kill", total, time.Since(killedAt).Round(time.Millisecond))

	// Exactly once: one DONE commit per event.
	rows, err = r.check.Query("SELECT r.event_id, COUNT(*), MIN(r.claimed_by) FROM lh_test_event_runs r JOIN events e ON e.id = r.event_id WHERE e.lease_id IN (" + in + ") GROUP BY r.event_id")
	if err != nil {
		t.Fatal(err)
	}
	runs, byClaimant := 0, map[string]int{}
	for rows.Next() {
		var id, by string
		var n int
		if err := rows.Scan(&id, &n, &by); err != nil {
			t.Fatal(err)
		}
		runs += n
		byClaimant[by]++
		if n != 1 {
			t.Errorf("event %s ran %d times", id, n)
		}
	}
	rows.Close()
	for _, id := range heldByKilled {
		var by string
		if err := r.check.QueryRow("SELECT claimed_by FROM lh_test_event_runs WHERE event_id = ?", id).Scan(&by); err != nil {
			t.Errorf("event %s, claimed by the killed process: %v", id, err)
		} else if strings.Contains(by, fmt.Sprintf("-%d-", killed.Pid())) {
			t.Errorf("event %s ran under the killed process's claim", id)
		}
	}
	if runs != total {
		t.Errorf("%d event runs recorded for %d events", runs, total)
	}
	// Exactly once, seen from the effects: each lease's start recorded one
	// reserve_host action and its end one release_host action, and no
	// action was recorded twice.
	rows, err = r.check.Query("SELECT lease_id, kind, COUNT(*) FROM lh_test_outbox_rows WHERE lease_id IN (" + in + ") GROUP BY lease_id, kind")
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]map[string]int{}
	for rows.Next() {
		var id, kind string
		var n int
		if err := rows.Scan(&id, &kind, &n); err != nil {
			t.Fatal(err)
		}
		if actions[id] == nil {
			actions[id] = map[string]int{}
		}
		actions[id][kind] = n
	}
	rows.Close()
	for _, id := range leaseIDs {
		// Whatever else the lease's life records (an aggregate made at
		// create), its start's reserve_host and its end's release_host
		// are there, and no action twice.
		a := actions[id]
		ok := a["compute.reserve_host"] == 1 && a["compute.release_host"] == 1
		for _, n := range a {
			ok = ok && n == 1
		}
		if !ok {
			t.Errorf("lease %s recorded compute actions %v, want each once, reserve_host and release_host among them", id, a)
		}
	}
	t.Logf("event executions: %d for %d events (by claimant: %v); compute actions recorded once per lease for %d leases", runs, total, byClaimant, len(actions))
	// The bookings of these leases never overlapped either.
	for _, o := range overlaps(r.bookings(t)) {
		t.Errorf("double booking: %s", o)
	}
}

// nodeNotReady: node 1 refuses every query, as a node cut off from the
// primary component does (error 1047, "WSREP has not yet prepared node
// for application use"). Process 1, on it, answers 503 in each API's own
// error body and its /healthcheck says 503 (a load balancer takes it out);
// once the node serves again, so does process 1.
func (r *replicas) nodeNotReady(t *testing.T) {
	if cluster.script == nil {
		t.Skip("the cluster was given (LEASEHOLD_TEST_GALERA_URLS): the test cannot make a node refuse queries")
	}
	s := r.servers[1]
	if _, err := cluster.script("reject", "1", "ALL"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := cluster.script("reject", "1", "NONE"); err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	checks := []struct {
		name, url string
		headers   []string
		body      func([]byte) bool
	}{
		{"healthcheck", s.URL + "/healthcheck", nil, func(b []byte) bool { return strings.Contains(string(b), "database unreachable") }},
		{"blazar", s.URL + "/v1/leases", nil, func(b []byte) bool {
			var doc struct {
				Code    int    `json:"error_code"`
				Message string `json:"error_message"`
			}
			return json.Unmarshal(b, &doc) == nil && doc.Code == http.StatusServiceUnavailable && doc.Message != ""
		}},
		{"placement", s.URL + "/placement/resource_providers", []string{"OpenStack-API-Version", placementVersion, "Accept", "application/json"}, func(b []byte) bool {
			var doc struct {
				Errors []struct {
					Status int `json:"status"`
				} `json:"errors"`
			}
			return json.Unmarshal(b, &doc) == nil && len(doc.Errors) == 1 && doc.Errors[0].Status == http.StatusServiceUnavailable
		}},
	}
	for _, c := range checks {
		code, b, err := r.client.Do(ctx, "GET", c.url, "", c.headers...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r.count(code)
		if code != http.StatusServiceUnavailable || !c.body(b) {
			t.Errorf("%s with node 1 refusing queries: %d %s; want 503 in the API's error body", c.name, code, b)
		}
	}
	// A lease create through process 1 is refused the same way, and
	// leaves nothing behind.
	code, b, err := r.client.Do(ctx, "POST", s.URL+"/v1/leases", leaseBody("while-rejecting", time.Date(2042, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2042, 1, 1, 1, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	r.count(code)
	if code != http.StatusServiceUnavailable {
		t.Errorf("lease create with node 1 refusing queries: %d %s; want 503", code, b)
	}
	if _, err := cluster.script("reject", "1", "NONE"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, b, err := r.client.Do(ctx, "GET", s.URL+"/v1/leases", "")
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process 1 not serving 30 s after its node serves again: %d %v %s", code, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var n int
	if err := r.check.QueryRow("SELECT COUNT(*) FROM leases WHERE name = 'while-rejecting'").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d leases from the refused create (%v)", n, err)
	}
}
