package placement

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/models"
	"github.com/leasehold/leasehold/pkg/config"
	"github.com/leasehold/leasehold/pkg/db/dbtest"
	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement"
	"github.com/leasehold/leasehold/pkg/placement/candidates"
)

// wideCandidates is the 8-children × 8-groups tree: 8! = 40,320
// candidates, a 41 MB answer at 1.39.
func wideCandidates(t testing.TB, mv microversion.Version, limit int) (*candidates.Result, *candidates.Request) {
	t.Helper()
	b := candidates.NewBuilder()
	b.AddClass(10000, "CUSTOM_ACC")
	b.AddClass(1, "VCPU")
	b.AddProvider(1, "00000000-0000-4000-8000-000000000001", 0, 1)
	b.AddInventory(1, 1, 64, 0, 1, 64, 1, 1)
	b.AddProviderTrait(1, "HW_CPU_X86_AVX2")
	for c := 0; c < 8; c++ {
		id := int64(c + 2)
		// UUIDs in the reverse of id order: mappings sort by UUID,
		// allocations by id.
		b.AddProvider(id, fmt.Sprintf("00000000-0000-4000-8000-%012d", 100-id), 1, 1)
		b.AddInventory(id, 10000, 1, 0, 1, 1, 1, 1)
	}
	var q []string
	for g := 1; g <= 8; g++ {
		if mv.AtLeast(1, 34) {
			q = append(q, fmt.Sprintf("resources_G%d=CUSTOM_ACC:1", g))
		} else {
			q = append(q, fmt.Sprintf("resources%d=CUSTOM_ACC:1", g))
		}
	}
	if mv.AtLeast(1, 25) {
		q = append(q, "group_policy=none")
	} else {
		// Before granular groups: one group, one candidate per child.
		q = []string{"resources=CUSTOM_ACC:1"}
	}
	if limit > 0 {
		q = append(q, fmt.Sprintf("limit=%d", limit))
	}
	req, err := placement.ParseCandidatesQuery(strings.Join(q, "&"), mv)
	if err != nil {
		t.Fatal(err)
	}
	req.MaxCandidates = -1
	res, err := b.Build().Find(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res, req
}

// TestStreamedRenderingEqualsWhole: the answer written in pieces is the
// same bytes as the answer encoded at once, valid JSON, for each shape.
func TestStreamedRenderingEqualsWhole(t *testing.T) {
	for _, tc := range []struct {
		mv    string
		limit int
		want  int
	}{
		{"1.10", 0, 8}, {"1.12", 0, 8}, {"1.29", 0, 40320}, {"1.33", 0, 40320}, {"1.34", 0, 40320}, {"1.39", 0, 40320}, {"1.39", 7, 7},
	} {
		t.Run(fmt.Sprintf("%s/limit=%d", tc.mv, tc.limit), func(t *testing.T) {
			mv, err := microversion.Parse(tc.mv)
			if err != nil {
				t.Fatal(err)
			}
			res, req := wideCandidates(t, mv, tc.limit)
			whole := renderCandidates(res, req, mv)
			var streamed bytes.Buffer
			flushes := 0
			rest, err := appendCandidates(nil, res, req, mv, func(b []byte) error {
				flushes++
				if len(b) < flushAt {
					t.Errorf("flushed %d bytes, fewer than %d", len(b), flushAt)
				}
				streamed.Write(b)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			streamed.Write(rest)
			if !bytes.Equal(streamed.Bytes(), whole) {
				t.Fatalf("streamed answer (%d bytes, %d flushes) differs from the whole one (%d bytes)", streamed.Len(), flushes, len(whole))
			}
			if wantFlush := len(whole) > 2*flushAt; wantFlush != (flushes > 0) {
				t.Errorf("%d flushes for a %d-byte answer", flushes, len(whole))
			}
			var body struct {
				AR []struct {
					Mappings map[string][]string `json:"mappings"`
				} `json:"allocation_requests"`
				PS map[string]any `json:"provider_summaries"`
			}
			if err := json.Unmarshal(whole, &body); err != nil {
				t.Fatalf("invalid JSON: %v", err)
			}
			if len(body.AR) != tc.want || len(body.PS) == 0 {
				t.Fatalf("%d allocation requests, %d summaries; want %d requests", len(body.AR), len(body.PS), tc.want)
			}
			if want := res.Request(0); mv.AtLeast(1, 34) && len(body.AR[0].Mappings) != len(want.Mappings) {
				t.Fatalf("mappings %v, want %v", body.AR[0].Mappings, want.Mappings)
			}
		})
	}
}

// TestStreamedRenderingStopsOnWriteError: a client gone mid-answer stops
// the encoding at the first failed write.
func TestStreamedRenderingStopsOnWriteError(t *testing.T) {
	mv := microversion.Version{Major: 1, Minor: 39}
	res, req := wideCandidates(t, mv, 0)
	calls := 0
	_, err := appendCandidates(nil, res, req, mv, func([]byte) error {
		calls++
		return fmt.Errorf("broken pipe")
	})
	if err == nil || calls != 1 {
		t.Fatalf("err %v after %d writes; want an error after 1", err, calls)
	}
}

// BenchmarkRenderWide: encoding the 41 MB wide answer (1.39), streamed
// in flushAt pieces as the handler does.
func BenchmarkRenderWide(b *testing.B) {
	mv := microversion.Version{Major: 1, Minor: 39}
	res, req := wideCandidates(b, mv, 0)
	buf := make([]byte, 0, 2*flushAt)
	b.ReportAllocs()
	var n int64
	for i := 0; i < b.N; i++ {
		n = 0
		rest, _ := appendCandidates(buf[:0], res, req, mv, func(p []byte) error { n += int64(len(p)); return nil })
		n += int64(len(rest))
	}
	b.SetBytes(n)
}

// TestHugeAnswerOverHTTP: a 40,320-candidate answer is streamed (chunked,
// no Content-Length) and arrives whole; a small one has a Content-Length.
func TestHugeAnswerOverHTTP(t *testing.T) {
	svc := placement.NewService(dbtest.Open(t), placement.Config{})
	srv := httptest.NewServer(New(svc, config.Placement{PolicyMode: "legacy", MaxAllocationCandidates: -1}, config.CORS{}).Handler())
	t.Cleanup(srv.Close)
	ctx := context.Background()
	root, err := svc.CreateProvider(ctx, "wide-root", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for c := 0; c < 8; c++ {
		p, err := svc.CreateProvider(ctx, fmt.Sprintf("wide-child-%d", c), "", &root.UUID)
		if err != nil {
			t.Fatal(err)
		}
		row := models.Inventory{ResourceProviderID: p.ID, ResourceClassID: 1 /* VCPU */, Total: 1, MinUnit: 1, MaxUnit: 1, StepSize: 1, AllocationRatio: 1}
		if err := svc.DB().Create(&row).Error; err != nil {
			t.Fatal(err)
		}
	}
	var q []string
	for g := 1; g <= 8; g++ {
		q = append(q, fmt.Sprintf("resources_G%d=VCPU:1", g))
	}
	query := strings.Join(q, "&") + "&group_policy=none"
	for _, tc := range []struct {
		query   string
		want    int
		chunked bool
	}{
		{query, 40320, true},
		{query + "&limit=3", 3, false},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/allocation_candidates?"+tc.query, nil)
		req.Header.Set("X-Auth-Token", "admin")
		req.Header.Set("OpenStack-API-Version", "placement 1.39")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %v %.200s", resp.StatusCode, err, body)
		}
		if chunked := resp.ContentLength < 0; chunked != tc.chunked {
			t.Errorf("%q: Content-Length %d, chunked %v; want chunked %v", tc.query[len(tc.query)-10:], resp.ContentLength, resp.TransferEncoding, tc.chunked)
		} else if !chunked && resp.ContentLength != int64(len(body)) {
			t.Errorf("Content-Length %d for %d bytes", resp.ContentLength, len(body))
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		var got struct {
			AR []json.RawMessage `json:"allocation_requests"`
		}
		if err := json.Unmarshal(body, &got); err != nil || len(got.AR) != tc.want {
			t.Fatalf("%d allocation requests (%v), want %d", len(got.AR), err, tc.want)
		}
	}
}
