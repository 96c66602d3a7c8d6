package leases

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/models"
)

// genText draws strings encoding/json treats specially as well as plain
// ones: quotes, backslashes, HTML characters, control characters,
// U+2028, multi-byte and invalid UTF-8.
func genText() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.StringMatching(`[a-z0-9-]{0,12}`),
		rapid.SampledFrom([]string{"", "lease<1>&", `a"b\c`, "tab\there", "\x00\x1f", "é–✓", "\u2028\u2029", "\xff\xfe", "日本"}),
		rapid.String(),
	)
}

// genTime draws instants with and without microseconds, some with
// nanoseconds below them, in and out of years 1-9999.
func genTime() *rapid.Generator[time.Time] {
	return rapid.Custom(func(t *rapid.T) time.Time {
		year := rapid.OneOf(rapid.IntRange(1970, 2100), rapid.SampledFrom([]int{1, 9999, 10000, 0})).Draw(t, "year")
		ns := rapid.OneOf(rapid.Just(0), rapid.IntRange(0, 999), rapid.IntRange(0, 999_999_999)).Draw(t, "ns")
		tm := time.Date(year, time.Month(rapid.IntRange(1, 12).Draw(t, "month")), rapid.IntRange(1, 28).Draw(t, "day"),
			rapid.IntRange(0, 23).Draw(t, "h"), rapid.IntRange(0, 59).Draw(t, "m"), rapid.IntRange(0, 59).Draw(t, "s"), ns, time.UTC)
		if rapid.Bool().Draw(t, "zoned") {
			tm = tm.In(time.FixedZone("X", rapid.IntRange(-12, 14).Draw(t, "zone")*3600))
		}
		return tm
	})
}

func genTimePtr(t *rapid.T, label string) *time.Time {
	if rapid.Bool().Draw(t, label+"-null") {
		return nil
	}
	tm := genTime().Draw(t, label)
	return &tm
}

// genValue draws a plugin field value: the types appendAny writes itself
// and others it leaves to encoding/json.
func genValue() *rapid.Generator[any] {
	return rapid.OneOf(
		rapid.Just[any](nil),
		rapid.Map(genText(), func(s string) any { return s }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Map(rapid.Int(), func(n int) any { return n }),
		rapid.Map(rapid.Int64(), func(n int64) any { return n }),
		rapid.Map(rapid.Int32(), func(n int32) any { return n }),
		rapid.Map(rapid.Float64(), func(f float64) any { return f }),
		rapid.Map(rapid.SliceOf(genText()), func(s []string) any { return s }),
		rapid.Just[any]([]string(nil)),
		rapid.Map(genText(), func(s string) any { return map[string]any{s: []any{1, s}} }),
		rapid.Map(rapid.Int(), func(n int) any { return json.Number(fmt.Sprint(n)) }),
	)
}

// genListing draws a listing: leases with reservations of a few plugin
// shapes (field sets that repeat, change, or shadow a row field) and
// events.
func genListing(t *rapid.T) *listing {
	l := &listing{extra: map[string]map[string]any{}}
	keySets := [][]string{
		{"min", "max", "hypervisor_properties", "resource_properties", "before_end"},
		{"network_id", "amount", "required_floatingips"},
		{"status", "zzz", "aaa"},
		{},
	}
	n := rapid.IntRange(0, 6).Draw(t, "leases")
	for i := range n {
		x := listedLease{l: models.Lease{
			ID: genText().Draw(t, "id"), Name: genText().Draw(t, "name"), UserID: genText().Draw(t, "user"),
			ProjectID: genText().Draw(t, "project"), StartDate: genTime().Draw(t, "start"), EndDate: genTime().Draw(t, "end"),
			TrustID: genText().Draw(t, "trust"), Status: genText().Draw(t, "status"), Degraded: rapid.Bool().Draw(t, "degraded"),
			CreatedAt: genTime().Draw(t, "created"), UpdatedAt: genTimePtr(t, "updated"),
		}}
		for j := range rapid.IntRange(0, 3).Draw(t, "reservations") {
			r := &models.Reservation{
				ID: fmt.Sprintf("r%d-%d", i, j), LeaseID: x.l.ID, ResourceID: genText().Draw(t, "resource"),
				ResourceType: genText().Draw(t, "type"), Status: genText().Draw(t, "rstatus"),
				MissingResources: rapid.Bool().Draw(t, "missing"), ResourcesChanged: rapid.Bool().Draw(t, "changed"),
				CreatedAt: genTime().Draw(t, "rcreated"), UpdatedAt: genTimePtr(t, "rupdated"),
			}
			if k := rapid.IntRange(-1, len(keySets)-1).Draw(t, "keys"); k >= 0 {
				m := map[string]any{}
				for _, key := range keySets[k] {
					m[key] = genValue().Draw(t, key)
				}
				l.extra[r.ID] = m
			}
			x.ress = append(x.ress, r)
			l.nRes++
		}
		for range rapid.IntRange(0, 4).Draw(t, "events") {
			x.evs = append(x.evs, &models.Event{
				ID: genText().Draw(t, "eid"), LeaseID: x.l.ID, EventType: genText().Draw(t, "etype"), Time: genTime().Draw(t, "time"),
				Status: genText().Draw(t, "estatus"), CreatedAt: genTime().Draw(t, "ecreated"), UpdatedAt: genTimePtr(t, "eupdated"),
			})
			l.nEv++
		}
		l.leases = append(l.leases, x)
	}
	return l
}

// TestListingRenderMatchesEncodingJSON: the listing's renderer writes
// exactly the bytes encoding/json writes for the same leases as Views.
func TestListingRenderMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := genListing(t)
		want, err := json.Marshal(l.views())
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.appendJSON([]byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got[len("prefix"):])); diff != "" {
			t.Fatalf("render differs from encoding/json (-want +got):\n%s", diff)
		}
	})
}

// TestAppendStringMatchesEncodingJSON covers every single byte and
// arbitrary strings.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for c := range 256 {
		s := "a" + string([]byte{byte(c)}) + "b"
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Errorf("byte %#x: got %s, want %s", c, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		s := genText().Draw(t, "s")
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

// TestParseStoredTime: every layout SQLite's driver writes or reads
// comes back as the same instant; text that is no date is an error.
func TestParseStoredTime(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Four-digit years both where drawn and in UTC (what is stored).
		tm := genTime().Filter(func(tm time.Time) bool {
			y, u := tm.Year(), tm.UTC().Year()
			return y >= 1 && y <= 9999 && u >= 1 && u <= 9999
		}).Draw(t, "t")
		for _, layout := range storedLayouts[:4] {
			s := tm.Format(layout)
			got, err := ParseStoredTime(s)
			want, werr := time.Parse(layout, s)
			if err != nil || werr != nil || !got.Equal(want) || got.Location() != time.UTC {
				t.Fatalf("%q (%s): got %v %v, want %v %v", s, layout, got, err, want, werr)
			}
		}
		s := tm.UTC().String() // with a monotonic reading when from time.Now
		got, err := ParseStoredTime(s + " m=+0.000000001")
		if err != nil || !got.Equal(tm) {
			t.Fatalf("%q: got %v %v", s, got, err)
		}
	})
	for _, s := range []string{"2030-01-01 10:00", "2030-01-01T10:00", "2030-01-01", "2030-01-01 10:00:00Z"} {
		if _, err := ParseStoredTime(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "x", "2030-02-30 10:00:00", "2030-13-01 10:00:00", "2030-01-01 24:00:00", "2030-01-01 10:00:00.", "2030-01-01 10:00:00+0100x"} {
		if got, err := ParseStoredTime(s); err == nil {
			t.Errorf("%q: got %v, want an error", s, got)
		}
	}
}
