package placement

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/microversion"
	"github.com/leasehold/leasehold/pkg/placement/candidates"
)

func mvv(minor int) microversion.Version { return microversion.Version{Major: 1, Minor: minor} }

func TestParseCandidatesQueryErrors(t *testing.T) {
	for _, tc := range []struct {
		mv          int
		query, want string
		code        string
	}{
		{10, "", "'resources' is a required property", ""},
		{10, "resources=VCPU:1&limit=2", "Additional properties are not allowed ('limit' was unexpected)", ""},
		{16, "resources=VCPU:1&limit=0", "Invalid query string parameters: '0' does not match '^[1-9][0-9]*$'", ""},
		{24, "resources1=VCPU:1", "'resources' is a required property", ""},
		{25, "resources1=VCPU:1&resources2=VCPU:1", `The "group_policy" parameter is required when specifying more than one "resources{N}" parameter.`, ""},
		{25, "resources1=VCPU:1&group_policy=bogus", "'bogus' is not one of ['none', 'isolate']", ""},
		{25, "resources_A=VCPU:1", "'resources_A' does not match any of the regexes: '^member_of([1-9][0-9]*)?$', '^required([1-9][0-9]*)?$', '^resources([1-9][0-9]*)?$'", ""},
		{35, "resources=VCPU:1&root_required=A&root_required=B", "Query parameter 'root_required' may be specified only once.", CodeQueryDuplicateKey},
		{35, "resources=VCPU:1&root_required=A,!A", "Conflicting required and forbidden traits found in root_required: A", CodeQueryBadValue},
		{36, "resources=VCPU:1&same_subtree=,_A", "Empty string (unsuffixed group) can not be specified in `same_subtree` ", CodeQueryBadValue},
		{36, "resources_A=VCPU:1&same_subtree=_A,_B", "Real suffixes should be specified in `same_subtree`: ['_B'] not found in ['_A'].", CodeQueryBadValue},
		{36, "required_A=FOO&resources=VCPU:1", "Resourceless suffixed group request should be specified in `same_subtree` query param: bad group(s) - ['_A'].", CodeQueryBadValue},
		{36, "required_A=FOO&same_subtree=_A", "There must be at least one resources or resources[$S] parameter.", CodeQueryMissingValue},
		{12, "resources=", "Badly formed resources parameter. Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: empty string.", ""},
		{22, "resources=VCPU:1&required=A,!A", "Conflicting required and forbidden traits found in the following traits keys: required: (A)", ""},
		{21, "resources=VCPU:1&required=!A", "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: !A", ""},
		{21, "resources=VCPU:1&member_of=x", "Expected 'member_of' parameter to contain valid UUID(s). Got: x", ""},
		{31, "resources=VCPU:1&in_tree=x", "Expected 'in_tree' parameter to be a format of uuid. Got: x", ""},
	} {
		_, err := ParseCandidatesQuery(tc.query, mvv(tc.mv))
		var pe *errs.Error
		if !errors.As(err, &pe) {
			t.Errorf("1.%d %q: got %v, want a 400", tc.mv, tc.query, err)
			continue
		}
		if pe.Kind != errs.BadRequest || !strings.Contains(pe.Msg, tc.want) {
			t.Errorf("1.%d %q: got %v %q, want %q", tc.mv, tc.query, pe.Kind, pe.Msg, tc.want)
		}
		if tc.code != "" && pe.Code != tc.code {
			t.Errorf("1.%d %q: code %s, want %s", tc.mv, tc.query, pe.Code, tc.code)
		}
	}
}

func TestParseCandidatesQuery(t *testing.T) {
	req, err := ParseCandidatesQuery("resources=VCPU:1,MEMORY_MB:64&required=A,!B&required=in:C,D&member_of=in:aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa,bbbbbbbb-aaaa-4aaa-8aaa-aaaaaaaaaaaa"+
		"&resources_X=FPGA:1&required_X=E&group_policy=isolate&limit=3&limit=9&root_required=R,!S&same_subtree=_X", mvv(39))
	if err != nil {
		t.Fatal(err)
	}
	want := &candidates.Request{
		Groups: []candidates.Group{
			{Suffix: "", Resources: []candidates.Resource{{Class: "VCPU", Amount: 1}, {Class: "MEMORY_MB", Amount: 64}},
				RequiredTraits: [][]string{{"A"}, {"C", "D"}}, ForbiddenTraits: []string{"B"},
				MemberOf: [][]string{{"aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa", "bbbbbbbb-aaaa-4aaa-8aaa-aaaaaaaaaaaa"}}},
			{Suffix: "_X", UseSameProvider: true, Resources: []candidates.Resource{{Class: "FPGA", Amount: 1}}, RequiredTraits: [][]string{{"E"}}},
		},
		GroupPolicy: "isolate", Limit: 3, RootRequired: []string{"R"}, RootForbidden: []string{"S"},
		SameSubtrees: [][]string{{"_X"}}, NestedAware: true,
	}
	if diff := cmp.Diff(want, req, cmp.Comparer(func(a, b []string) bool {
		return strings.Join(a, ",") == strings.Join(b, ",")
	})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseCandidatesQueryHugeLimit(t *testing.T) {
	req, err := ParseCandidatesQuery("resources=VCPU:1&limit=99999999999999999999999", mvv(16))
	if err != nil || req.Limit < 1<<40 {
		t.Fatalf("got %v %+v", err, req)
	}
}

// FuzzParseCandidatesQuery: any query string at any version either parses
// or fails with a 400 *Error; never a panic or another error.
func FuzzParseCandidatesQuery(f *testing.F) {
	for _, s := range []string{"resources=VCPU:1", "resources_A=VCPU:1&required_A=in:X,Y&same_subtree=_A",
		"resources=VCPU:1&limit=5&root_required=!A", "member_of=!in:a,b", "%ff=1", "group_policy=none&resources1=A:1"} {
		f.Add(s, 39)
		f.Add(s, 25)
	}
	f.Fuzz(func(t *testing.T, q string, minor int) {
		if minor < 10 || minor > 39 {
			minor = 10 + (minor%30+30)%30
		}
		req, err := ParseCandidatesQuery(q, mvv(minor))
		if err != nil {
			var pe *errs.Error
			if !errors.As(err, &pe) || pe.Kind != errs.BadRequest {
				t.Fatalf("%q: %v", q, err)
			}
			return
		}
		if len(req.Groups) == 0 {
			t.Fatalf("%q parsed without groups", q)
		}
	})
}
