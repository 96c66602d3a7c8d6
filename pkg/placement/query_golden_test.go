package placement

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/errs"
	"github.com/leasehold/leasehold/pkg/microversion"
)

// The golden cases are the real Placement 8.0.0 parsers' answers
// (testdata/gen_query_golden.py); these tests check the Go parsers give
// the same results and the same error messages.

type goldenTraits struct {
	Any       [][]string `json:"any"`
	Forbidden []string   `json:"forbidden"`
}

type goldenGroup struct {
	UseSameProvider bool        `json:"use_same_provider"`
	Resources       [][2]string `json:"resources"`
	Required        [][]string  `json:"required"`
	Forbidden       []string    `json:"forbidden"`
	MemberOf        [][]string  `json:"member_of"`
	ForbiddenAggs   []string    `json:"forbidden_aggs"`
	InTree          *string     `json:"in_tree"`
}

type goldenFile struct {
	Resources []struct {
		In  string      `json:"in"`
		OK  [][2]string `json:"ok"`
		Err *string     `json:"err"`
	} `json:"resources"`
	Traits []struct {
		In             string        `json:"in"`
		AllowForbidden bool          `json:"allow_forbidden"`
		AllowAny       bool          `json:"allow_any"`
		OK             *goldenTraits `json:"ok"`
		Err            *string       `json:"err"`
	} `json:"traits"`
	MemberOf []struct {
		In string `json:"in"`
		OK *struct {
			Req  []string `json:"req"`
			Forb []string `json:"forb"`
		} `json:"ok"`
		Err  *string  `json:"err"`
		Alts []string `json:"alts"`
	} `json:"member_of"`
	UUID []struct {
		In        string  `json:"in"`
		Like      bool    `json:"like"`
		InTree    *string `json:"in_tree"`
		InTreeErr *string `json:"in_tree_err"`
	} `json:"uuid"`
	Requests []goldenRequest `json:"requests"`
	Groups   []goldenRequest `json:"groups"`
}

type goldenRequest struct {
	QS           string               `json:"qs"`
	MV           string               `json:"mv"`
	Items        [][2]string          `json:"items"`
	ItemsErr     *string              `json:"items_err"`
	MemberOf     *goldenTraits        `json:"member_of"`
	MemberOfErr  *string              `json:"member_of_err"`
	Required     *goldenTraits        `json:"required"`
	RequiredErr  *string              `json:"required_err"`
	SameSubtrees [][]string           `json:"same_subtrees"`
	Groups       [][2]json.RawMessage `json:"groups"`
	GroupsAlts   []string             `json:"groups_alts"`
	GroupsCode   *string              `json:"groups_code"`
}

func loadGolden(t *testing.T) *goldenFile {
	t.Helper()
	b, err := os.ReadFile("testdata/query_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// errMessage returns the message of a parser error, failing unless it is
// a 400 *Error.
func errMessage(t *testing.T, err error) string {
	t.Helper()
	var pe *errs.Error
	if !errors.As(err, &pe) || pe.Kind != errs.BadRequest {
		t.Fatalf("error %v (%T) is not a 400 *Error", err, err)
	}
	return pe.Msg
}

func goldenAmount(t *testing.T, s string) int64 {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("bad golden amount %q", s)
	}
	if !n.IsInt64() {
		return math.MaxInt64
	}
	return n.Int64()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNil2(s [][]string) [][]string {
	if s == nil {
		return [][]string{}
	}
	return s
}

func TestGoldenResources(t *testing.T) {
	for _, c := range loadGolden(t).Resources {
		got, err := ParseResources(c.In)
		if c.Err != nil {
			if err == nil {
				t.Errorf("ParseResources(%q) = %v, want error %q", c.In, got, *c.Err)
			} else if msg := errMessage(t, err); msg != *c.Err {
				t.Errorf("ParseResources(%q) error\n got %q\nwant %q", c.In, msg, *c.Err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseResources(%q): unexpected error %v", c.In, err)
			continue
		}
		var want Resources
		for _, kv := range c.OK {
			want = append(want, ResourceAmount{Class: kv[0], Amount: goldenAmount(t, kv[1])})
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ParseResources(%q) mismatch (-want +got):\n%s", c.In, diff)
		}
	}
}

func TestGoldenRequiredValue(t *testing.T) {
	for _, c := range loadGolden(t).Traits {
		got, err := ParseRequiredValue(c.In, c.AllowForbidden, c.AllowAny)
		if c.Err != nil {
			if err == nil {
				t.Errorf("ParseRequiredValue(%q, %v, %v) = %v, want error %q", c.In, c.AllowForbidden, c.AllowAny, got, *c.Err)
			} else if msg := errMessage(t, err); msg != *c.Err {
				t.Errorf("ParseRequiredValue(%q, %v, %v) error\n got %q\nwant %q", c.In, c.AllowForbidden, c.AllowAny, msg, *c.Err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRequiredValue(%q, %v, %v): unexpected error %v", c.In, c.AllowForbidden, c.AllowAny, err)
			continue
		}
		want := goldenTraits{Any: nonNil2(c.OK.Any), Forbidden: nonNil(c.OK.Forbidden)}
		gotT := goldenTraits{Any: nonNil2(got.AnyOf), Forbidden: nonNil(got.Forbidden)}
		if diff := cmp.Diff(want, gotT); diff != "" {
			t.Errorf("ParseRequiredValue(%q, %v, %v) mismatch (-want +got):\n%s", c.In, c.AllowForbidden, c.AllowAny, diff)
		}
	}
}

func TestGoldenMemberOfValue(t *testing.T) {
	for _, c := range loadGolden(t).MemberOf {
		req, forb, err := ParseMemberOfValue(c.In)
		switch {
		case c.Err != nil || c.Alts != nil:
			if err == nil {
				t.Errorf("ParseMemberOfValue(%q) = %v %v, want an error", c.In, req, forb)
				continue
			}
			msg := errMessage(t, err)
			alts := c.Alts
			if c.Err != nil {
				alts = append(alts, *c.Err)
			}
			if !slices.Contains(alts, msg) {
				t.Errorf("ParseMemberOfValue(%q) error\n got %q\nwant one of %q", c.In, msg, alts)
			}
		case err != nil:
			t.Errorf("ParseMemberOfValue(%q): unexpected error %v", c.In, err)
		default:
			if diff := cmp.Diff([][]string{nonNil(c.OK.Req), nonNil(c.OK.Forb)}, [][]string{nonNil(req), nonNil(forb)}); diff != "" {
				t.Errorf("ParseMemberOfValue(%q) mismatch (-want +got):\n%s", c.In, diff)
			}
		}
	}
}

func TestGoldenUUID(t *testing.T) {
	for _, c := range loadGolden(t).UUID {
		if got := IsUUIDLike(c.In); got != c.Like {
			t.Errorf("IsUUIDLike(%q) = %v, want %v", c.In, got, c.Like)
		}
		got, err := ParseInTree(c.In)
		switch {
		case c.InTreeErr != nil:
			if err == nil {
				t.Errorf("ParseInTree(%q) = %q, want error", c.In, got)
			} else if msg := errMessage(t, err); msg != *c.InTreeErr {
				t.Errorf("ParseInTree(%q) error\n got %q\nwant %q", c.In, msg, *c.InTreeErr)
			}
		case err != nil:
			t.Errorf("ParseInTree(%q): %v", c.In, err)
		case got != *c.InTree:
			t.Errorf("ParseInTree(%q) = %q, want %q", c.In, got, *c.InTree)
		}
	}
}

func mustMV(t *testing.T, s string) microversion.Version {
	v, err := microversion.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkRequest compares ParseQuery, ParseMemberOf and ParseRequired on a
// whole query string.
func checkRequest(t *testing.T, c goldenRequest) (*Query, bool) {
	t.Helper()
	q, err := ParseQuery(c.QS)
	if c.ItemsErr != nil {
		if err == nil {
			t.Errorf("ParseQuery(%q) = %v, want error %q", c.QS, q.Items(), *c.ItemsErr)
		} else if err.Error() != *c.ItemsErr {
			t.Errorf("ParseQuery(%q) error\n got %q\nwant %q", c.QS, err, *c.ItemsErr)
		}
		return nil, false
	}
	if err != nil {
		t.Errorf("ParseQuery(%q): %v", c.QS, err)
		return nil, false
	}
	want := c.Items
	if want == nil {
		want = [][2]string{}
	}
	if diff := cmp.Diff(want, q.Items()); diff != "" {
		t.Errorf("ParseQuery(%q) mismatch (-want +got):\n%s", c.QS, diff)
	}
	mv := mustMV(t, c.MV)
	mo, err := ParseMemberOf(q.GetAll("member_of"), "", mv)
	switch {
	case c.MemberOfErr != nil:
		if err == nil {
			t.Errorf("%s ParseMemberOf(%q) = %v, want error %q", c.MV, c.QS, mo, *c.MemberOfErr)
		} else if msg := errMessage(t, err); msg != *c.MemberOfErr {
			// Several bad uuids: upstream names the first in set order.
			if !(len(msg) > 60 && len(*c.MemberOfErr) > 60 && msg[:60] == (*c.MemberOfErr)[:60]) {
				t.Errorf("%s ParseMemberOf(%q) error\n got %q\nwant %q", c.MV, c.QS, msg, *c.MemberOfErr)
			}
		}
	case err != nil:
		t.Errorf("%s ParseMemberOf(%q): %v", c.MV, c.QS, err)
	default:
		if diff := cmp.Diff(goldenTraits{nonNil2(c.MemberOf.Any), nonNil(c.MemberOf.Forbidden)},
			goldenTraits{nonNil2(mo.AnyOf), nonNil(mo.Forbidden)}); diff != "" {
			t.Errorf("%s ParseMemberOf(%q) mismatch (-want +got):\n%s", c.MV, c.QS, diff)
		}
	}
	rt, err := ParseRequired(q.GetAll("required"), mv)
	switch {
	case c.RequiredErr != nil:
		if err == nil {
			t.Errorf("%s ParseRequired(%q) = %v, want error %q", c.MV, c.QS, rt, *c.RequiredErr)
		} else if msg := errMessage(t, err); msg != *c.RequiredErr {
			t.Errorf("%s ParseRequired(%q) error\n got %q\nwant %q", c.MV, c.QS, msg, *c.RequiredErr)
		}
	case err != nil:
		t.Errorf("%s ParseRequired(%q): %v", c.MV, c.QS, err)
	default:
		if diff := cmp.Diff(goldenTraits{nonNil2(c.Required.Any), nonNil(c.Required.Forbidden)},
			goldenTraits{nonNil2(rt.AnyOf), nonNil(rt.Forbidden)}); diff != "" {
			t.Errorf("%s ParseRequired(%q) mismatch (-want +got):\n%s", c.MV, c.QS, diff)
		}
	}
	return q, true
}

func TestGoldenRequests(t *testing.T) {
	for _, c := range loadGolden(t).Requests {
		checkRequest(t, c)
	}
}

func TestGoldenRequestGroups(t *testing.T) {
	for _, c := range loadGolden(t).Groups {
		q, ok := checkRequest(t, c)
		if !ok {
			continue
		}
		mv := mustMV(t, c.MV)
		got, err := ParseRequestGroups(q, mv, c.SameSubtrees)
		if c.GroupsAlts != nil {
			if err == nil {
				t.Errorf("%s ParseRequestGroups(%q, %v) succeeded, want one of %q", c.MV, c.QS, c.SameSubtrees, c.GroupsAlts)
				continue
			}
			msg := errMessage(t, err)
			if !slices.Contains(c.GroupsAlts, msg) {
				t.Errorf("%s ParseRequestGroups(%q, %v) error\n got %q\nwant one of %q", c.MV, c.QS, c.SameSubtrees, msg, c.GroupsAlts)
			}
			var pe *errs.Error
			errors.As(err, &pe)
			wantCode := CodeUndefined
			if c.GroupsCode != nil {
				wantCode = *c.GroupsCode
			}
			if pe.Code != wantCode {
				t.Errorf("%s ParseRequestGroups(%q) code %q, want %q", c.MV, c.QS, pe.Code, wantCode)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s ParseRequestGroups(%q, %v): %v", c.MV, c.QS, c.SameSubtrees, err)
			continue
		}
		var want, have [][2]any
		for _, kv := range c.Groups {
			var suffix string
			var g goldenGroup
			if err := json.Unmarshal(kv[0], &suffix); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(kv[1], &g); err != nil {
				t.Fatal(err)
			}
			g.Required, g.MemberOf = nonNil2(g.Required), nonNil2(g.MemberOf)
			g.Forbidden, g.ForbiddenAggs = nonNil(g.Forbidden), nonNil(g.ForbiddenAggs)
			if g.Resources == nil {
				g.Resources = [][2]string{}
			}
			want = append(want, [2]any{suffix, g})
		}
		for _, g := range got {
			gg := goldenGroup{UseSameProvider: g.UseSameProvider, Required: nonNil2(g.RequiredTraits),
				Forbidden: nonNil(g.ForbiddenTraits), MemberOf: nonNil2(g.MemberOf), ForbiddenAggs: nonNil(g.ForbiddenAggs),
				Resources: [][2]string{}}
			for _, r := range g.Resources {
				gg.Resources = append(gg.Resources, [2]string{r.Class, big.NewInt(r.Amount).String()})
			}
			if g.InTree != "" {
				it := g.InTree
				gg.InTree = &it
			}
			have = append(have, [2]any{g.Suffix, gg})
		}
		if diff := cmp.Diff(want, have); diff != "" {
			t.Errorf("%s ParseRequestGroups(%q, %v) mismatch (-want +got):\n%s", c.MV, c.QS, c.SameSubtrees, diff)
		}
	}
}
