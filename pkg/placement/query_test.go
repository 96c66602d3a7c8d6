package placement

import (
	"errors"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/microversion"
)

// Hand-written cases documenting the syntax; query_golden_test.go holds
// the differential cases against upstream's code.

func v1(minor int) microversion.Version { return microversion.Version{Major: 1, Minor: minor} }

func TestParseResources(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Resources
		wantErr string
	}{
		{in: "VCPU:2,MEMORY_MB:1024", want: Resources{{"VCPU", 2}, {"MEMORY_MB", 1024}}},
		{in: "VCPU:1,DISK_GB:2,VCPU:3", want: Resources{{"VCPU", 3}, {"DISK_GB", 2}}},
		{in: "VCPU: 3 ", want: Resources{{"VCPU", 3}}},
		{in: "VCPU:1_000", want: Resources{{"VCPU", 1000}}},
		{in: "VCPU:\u0663", want: Resources{{"VCPU", 3}}},
		{in: "VCPU:99999999999999999999999", want: Resources{{"VCPU", math.MaxInt64}}},
		{in: "", wantErr: "Badly formed resources parameter. Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: empty string."},
		{in: " ", wantErr: "Got: empty string."},
		{in: "VCPU", wantErr: "Got: VCPU."},
		{in: "VCPU:1:2", wantErr: "Got: VCPU:1:2."},
		{in: "VCPU:1,", wantErr: "Got: ."},
		{in: "VCPU:one", wantErr: "Requested resource VCPU expected positive integer amount. Got: one."},
		{in: "VCPU:1.0", wantErr: "expected positive integer amount. Got: 1.0."},
		{in: "VCPU:0", wantErr: "Requested resource VCPU requires amount >= 1. Got: 0."},
		{in: "VCPU:-02", wantErr: "Requested resource VCPU requires amount >= 1. Got: -2."},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseResources(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseResources(%q) error = %v, want it to contain %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseResources(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseRequired(t *testing.T) {
	for _, tc := range []struct {
		name    string
		values  []string
		mv      int
		want    RequiredTraits
		wantErr string
	}{
		{name: "plain", values: []string{"A,B"}, mv: 18, want: RequiredTraits{AnyOf: [][]string{{"A"}, {"B"}}, Forbidden: []string{}}},
		{name: "last wins before 1.39", values: []string{"A", "B"}, mv: 38, want: RequiredTraits{AnyOf: [][]string{{"B"}}, Forbidden: []string{}}},
		{name: "anded from 1.39", values: []string{"A", "in:B,C"}, mv: 39, want: RequiredTraits{AnyOf: [][]string{{"A"}, {"B", "C"}}, Forbidden: []string{}}},
		{name: "forbidden 1.22", values: []string{"A,!B,!!C"}, mv: 22, want: RequiredTraits{AnyOf: [][]string{{"A"}}, Forbidden: []string{"B", "C"}}},
		{name: "forbidden before 1.22", values: []string{"A,!B"}, mv: 21,
			wantErr: "Invalid query string parameters: Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: A,!B"},
		{name: "empty trait", values: []string{"A,,B"}, mv: 22,
			wantErr: "Invalid query string parameters: Expected 'required' parameter value of the form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: A,,B"},
		{name: "in before 1.39", values: []string{"in:A,B"}, mv: 38,
			wantErr: "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. Got: in:A,B"},
		{name: "in with forbidden", values: []string{"in:A,!B"}, mv: 39,
			wantErr: "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden traits. Got: in:A,!B"},
		{name: "in with empty", values: []string{"in:A,"}, mv: 39,
			wantErr: "Invalid query string parameters: Expected 'required' parameter value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: in:A,"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRequired(tc.values, v1(tc.mv))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

const (
	aggA = "11111111-2222-3333-4444-555555555555"
	aggB = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
)

func TestParseMemberOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		values  []string
		mv      int
		want    MemberOf
		wantErr string
	}{
		{name: "one", values: []string{aggA}, mv: 3, want: MemberOf{AnyOf: [][]string{{aggA}}, Forbidden: []string{}}},
		{name: "in", values: []string{"in:" + aggB + "," + aggA}, mv: 3, want: MemberOf{AnyOf: [][]string{{aggA, aggB}}, Forbidden: []string{}}},
		{name: "repeated", values: []string{aggA, aggB}, mv: 24, want: MemberOf{AnyOf: [][]string{{aggA}, {aggB}}, Forbidden: []string{}}},
		{name: "repeated before 1.24", values: []string{aggA, aggB}, mv: 23, wantErr: "Multiple member_of parameters are not supported"},
		{name: "forbidden", values: []string{"!in:" + aggA + "," + aggB, "!" + aggA}, mv: 32, want: MemberOf{Forbidden: []string{aggA, aggB}}},
		{name: "forbidden before 1.32", values: []string{"!" + aggA}, mv: 31, wantErr: "Forbidden member_of parameters are not supported in the specified microversion"},
		{name: "comma without in", values: []string{aggA + "," + aggB}, mv: 39,
			wantErr: "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword using the valid microversion. Got: " + aggA + "," + aggB},
		{name: "bad uuid", values: []string{"in:" + aggA + ",nope"}, mv: 39,
			wantErr: "Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMemberOf(tc.values, "", v1(tc.mv))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsUUIDLikeAndCanonical(t *testing.T) {
	for _, tc := range []struct {
		in   string
		like bool
	}{
		{aggA, true},
		{strings.ToUpper(aggB), true},
		{strings.ReplaceAll(aggA, "-", ""), true},
		{"{" + aggA + "}", true},
		{"urn:uuid:" + aggA, true},
		{aggA[:35], false},
		{"0x" + aggA[2:], false},
		{" " + aggA, false},
		{"", false},
	} {
		if got := IsUUIDLike(tc.in); got != tc.like {
			t.Errorf("IsUUIDLike(%q) = %v, want %v", tc.in, got, tc.like)
		}
		if tc.like {
			if got := CanonicalUUID(tc.in); got != strings.ToLower(strings.Trim(strings.TrimPrefix(tc.in, "urn:uuid:"), "{}")) && got != aggA {
				t.Errorf("CanonicalUUID(%q) = %q", tc.in, got)
			}
		}
	}
}

func TestParseQuery(t *testing.T) {
	q, err := ParseQuery("a=1&b=x+y;a=2&c&=v&d=%41%2C&a=3")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"a", "1"}, {"b", "x y"}, {"a", "2"}, {"c", ""}, {"", "v"}, {"d", "A,"}, {"a", "3"}}
	if diff := cmp.Diff(want, q.Items()); diff != "" {
		t.Errorf("Items mismatch (-want +got):\n%s", diff)
	}
	if v, _ := q.Get("a"); v != "3" {
		t.Errorf("Get(a) = %q, want the last value", v)
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "", "d"}, q.Keys()); diff != "" {
		t.Errorf("Keys mismatch (-want +got):\n%s", diff)
	}
	if _, err := ParseQuery("a=%ff"); err == nil || err.Error() != "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte" {
		t.Errorf("bad UTF-8: error %v", err)
	}
}

// ---- fuzz targets: run with go test -fuzz=FuzzX ./pkg/placement ----

func isBadRequest(err error) bool {
	var pe *errs.Error
	return errors.As(err, &pe) && pe.Kind == errs.BadRequest && pe.Msg != ""
}

func FuzzParseResources(f *testing.F) {
	for _, s := range []string{"", "VCPU:1", "VCPU:1,MEMORY_MB:1024", "VCPU:-1", "VCPU:x", "A:1:2", "VCPU:\u0663", "A:1_0", "A:1,A:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := ParseResources(s)
		if err != nil {
			if !isBadRequest(err) {
				t.Fatalf("ParseResources(%q): %v is not a 400 *Error", s, err)
			}
			return
		}
		if len(rs) == 0 {
			t.Fatalf("ParseResources(%q) succeeded with nothing", s)
		}
		seen := map[string]bool{}
		var parts []string
		for _, r := range rs {
			if r.Amount < 1 {
				t.Fatalf("ParseResources(%q): amount %d < 1", s, r.Amount)
			}
			if seen[r.Class] {
				t.Fatalf("ParseResources(%q): class %q twice", s, r.Class)
			}
			seen[r.Class] = true
			parts = append(parts, r.Class+":"+itoa(r.Amount))
		}
		// Re-rendering the result parses back to itself.
		again, err := ParseResources(strings.Join(parts, ","))
		if err != nil || !slices.Equal(again, rs) {
			t.Fatalf("round trip of %q: %v, %v", s, again, err)
		}
	})
}

func itoa(n int64) string {
	var b []byte
	if n == 0 {
		return "0"
	}
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func FuzzParseRequiredValue(f *testing.F) {
	for _, s := range []string{"", "A", "A,!B", "in:A,B", "in:", "!", "!!A", "A,,B", "in:A,!B"} {
		f.Add(s, true, true)
		f.Add(s, false, false)
	}
	f.Fuzz(func(t *testing.T, s string, allowForbidden, allowAny bool) {
		rt, err := ParseRequiredValue(s, allowForbidden, allowAny)
		if err != nil {
			if !isBadRequest(err) || !strings.HasPrefix(err.Error(), "Invalid query string parameters: ") {
				t.Fatalf("ParseRequiredValue(%q): bad error %v", s, err)
			}
			return
		}
		if !allowForbidden && len(rt.Forbidden) > 0 {
			t.Fatalf("ParseRequiredValue(%q): forbidden traits without allowForbidden", s)
		}
		if len(rt.AnyOf) == 0 && len(rt.Forbidden) == 0 {
			t.Fatalf("ParseRequiredValue(%q) succeeded with nothing", s)
		}
		for _, any := range rt.AnyOf {
			if len(any) == 0 || (!allowAny && len(any) != 1) {
				t.Fatalf("ParseRequiredValue(%q): bad any-of set %q", s, any)
			}
			if !slices.IsSorted(any) || len(slices.Compact(slices.Clone(any))) != len(any) {
				t.Fatalf("ParseRequiredValue(%q): set %q not sorted and unique", s, any)
			}
			for _, tr := range any {
				if tr == "" || strings.HasPrefix(tr, "!") {
					t.Fatalf("ParseRequiredValue(%q): bad trait %q", s, tr)
				}
			}
		}
		for _, tr := range rt.Forbidden {
			if tr == "" || strings.HasPrefix(tr, "!") {
				t.Fatalf("ParseRequiredValue(%q): bad forbidden trait %q", s, tr)
			}
		}
	})
}

func FuzzParseMemberOfValue(f *testing.F) {
	for _, s := range []string{aggA, "!" + aggA, "in:" + aggA + "," + aggB, "!in:" + aggA, aggA + "," + aggB, "", "in:", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		req, forb, err := ParseMemberOfValue(s)
		if err != nil {
			if !isBadRequest(err) {
				t.Fatalf("ParseMemberOfValue(%q): %v", s, err)
			}
			return
		}
		if (len(req) == 0) == (len(forb) == 0) {
			t.Fatalf("ParseMemberOfValue(%q) = %q, %q: want exactly one non-empty", s, req, forb)
		}
		for _, u := range append(req, forb...) {
			if !IsUUIDLike(u) {
				t.Fatalf("ParseMemberOfValue(%q): %q is not uuid-like", s, u)
			}
		}
	})
}

func FuzzParseInTree(f *testing.F) {
	for _, s := range []string{aggA, " " + aggA + " ", "x", "", "{" + aggA + "}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseInTree(s)
		if (err == nil) != IsUUIDLike(pyStrip(s)) {
			t.Fatalf("ParseInTree(%q) = %q, %v", s, got, err)
		}
		if err != nil && !isBadRequest(err) {
			t.Fatalf("ParseInTree(%q): %v", s, err)
		}
		if err == nil {
			c := CanonicalUUID(got)
			if !IsUUIDLike(c) || CanonicalUUID(c) != c || len(c) != 36 {
				t.Fatalf("CanonicalUUID(%q) = %q", got, c)
			}
		}
	})
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"a=1&b=2", "a;b=c", "%ff", "a+b=%20", "=&&=", "a=%e2%82"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "'utf-8' codec can't decode") {
				t.Fatalf("ParseQuery(%q): %v", s, err)
			}
			return
		}
		// Re-encoding the pairs parses back to the same pairs.
		var parts []string
		for _, it := range q.Items() {
			if !utf8.ValidString(it[0]) || !utf8.ValidString(it[1]) {
				t.Fatalf("ParseQuery(%q): invalid UTF-8 in %q", s, it)
			}
			parts = append(parts, url.QueryEscape(it[0])+"="+url.QueryEscape(it[1]))
		}
		again, err := ParseQuery(strings.Join(parts, "&"))
		if err != nil {
			t.Fatal(err)
		}
		want := q.Items()
		// Pairs with an empty key and value vanish ("=" splits to nothing
		// only when the whole part is empty; "=" itself is kept).
		if diff := cmp.Diff(want, again.Items()); diff != "" {
			t.Fatalf("round trip of %q (-want +got):\n%s", s, diff)
		}
	})
}

func FuzzParseRequestGroups(f *testing.F) {
	for _, s := range []string{"resources=VCPU:1", "resources1=VCPU:1&required1=A", "required=A", "resources_X=VCPU:1&member_of_X=" + aggA, ""} {
		f.Add(s, uint8(39), "1,2")
	}
	f.Fuzz(func(t *testing.T, s string, minor uint8, subtree string) {
		q, err := ParseQuery(s)
		if err != nil {
			return
		}
		var ss [][]string
		if subtree != "" {
			ss = [][]string{strings.Split(subtree, ",")}
		}
		gs, err := ParseRequestGroups(q, v1(int(minor%40)), ss)
		if err != nil {
			if !isBadRequest(err) {
				t.Fatalf("ParseRequestGroups(%q): %v", s, err)
			}
			return
		}
		if len(gs) == 0 {
			t.Fatalf("ParseRequestGroups(%q) succeeded with no group", s)
		}
		seen := map[string]bool{}
		for _, g := range gs {
			if seen[g.Suffix] || g.UseSameProvider != (g.Suffix != "") {
				t.Fatalf("ParseRequestGroups(%q): bad group %+v", s, g)
			}
			seen[g.Suffix] = true
		}
	})
}
