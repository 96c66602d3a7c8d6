package microversion

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNegotiate(t *testing.T) {
	min, max := Version{1, 0}, Version{1, 39}
	for _, tc := range []struct {
		name    string
		headers []string
		want    Version
		wantErr string
	}{
		{"missing header means the minimum", nil, min, ""},
		{"latest", []string{"placement latest"}, max, ""},
		{"case-insensitive service", []string{"PLACEMENT 1.5"}, Version{1, 5}, ""},
		{"last entry for the service wins", []string{"compute 2.1, placement 1.5, placement 1.9"}, Version{1, 9}, ""},
		{"other services ignored", []string{"compute 2.90"}, min, ""},
		{"leading zero parses", []string{"placement 1.01"}, Version{1, 1}, ""},
		{"several header lines", []string{"placement 1.2", "placement 1.3"}, Version{1, 3}, ""},
		{"out of range above", []string{"placement 1.40"}, Version{}, "Unacceptable version header: 1.40"},
		{"out of range below", []string{"placement 0.5"}, Version{}, "Unacceptable version header: 0.5"},
		{"not a version", []string{"placement pony.horse"}, Version{}, "invalid version string: pony.horse"},
		{"three parts", []string{"placement 1.2.3"}, Version{}, "invalid version string: 1.2.3"},
		{"no minor", []string{"placement 1"}, Version{}, "invalid version string: 1"},
		{"signed", []string{"placement 1.-1"}, Version{}, "invalid version string: 1.-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Negotiate(tc.headers, "placement", min, max)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Negotiate(%q) error = %v, want %q", tc.headers, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Negotiate(%q): %v", tc.headers, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Negotiate(%q) mismatch (-want +got):\n%s", tc.headers, diff)
			}
		})
	}
}

func TestNotAcceptableIsTyped(t *testing.T) {
	_, err := Negotiate([]string{"placement 9.9"}, "placement", Version{1, 0}, Version{1, 39})
	var na *ErrNotAcceptable
	if !errors.As(err, &na) || na.Requested != "9.9" {
		t.Fatalf("error %v is not an *ErrNotAcceptable for 9.9", err)
	}
}

// FuzzNegotiate: any header either yields a version inside the range or
// an error, never a panic; an accepted version formats and parses back.
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{"placement 1.5", "placement latest", "compute 2.1, placement 1.9", "placement 1.2.3", "placement ", ",,", "placement 99999999999999999999.1"} {
		f.Add(s)
	}
	min, max := Version{1, 0}, Version{1, 39}
	f.Fuzz(func(t *testing.T, h string) {
		v, err := Negotiate([]string{h}, "placement", min, max)
		if err != nil {
			return
		}
		if v.Less(min) || max.Less(v) {
			t.Fatalf("Negotiate(%q) = %v, outside [%v, %v]", h, v, min, max)
		}
		back, err := Parse(v.String())
		if err != nil || back != v {
			t.Fatalf("Parse(%q) = %v, %v; want %v", v.String(), back, err, v)
		}
	})
}
