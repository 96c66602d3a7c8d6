package errs

import (
	"errors"
	"fmt"
	"testing"
)

func TestKindOf(t *testing.T) {
	base := Conflictf("host %s is reserved", "h1")
	for _, tc := range []struct {
		name string
		err  error
		want Kind
		msg  string
	}{
		{"direct", base, Conflict, "host h1 is reserved"},
		{"wrapped", fmt.Errorf("delete: %w", base), Conflict, "host h1 is reserved"},
		{"joined", errors.Join(errors.New("x"), NotFoundf("gone")), NotFound, "gone"},
		{"plain", errors.New("boom"), Internal, ""},
		{"nil", nil, Internal, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := KindOf(tc.err); got != tc.want {
				t.Errorf("KindOf = %v, want %v", got, tc.want)
			}
			e := As(tc.err)
			if (e != nil) != (tc.msg != "") {
				t.Fatalf("As = %v", e)
			}
			if e != nil && e.Msg != tc.msg {
				t.Errorf("Msg = %q, want %q", e.Msg, tc.msg)
			}
		})
	}
}

func TestWrapKeepsCause(t *testing.T) {
	cause := errors.New("connection refused")
	err := Wrap(Unavailable, cause, "compute service unreachable")
	if !errors.Is(err, cause) || !Is(err, Unavailable) || err.Error() != "compute service unreachable" {
		t.Fatalf("Wrap: %v", err)
	}
	if Kind(99).String() != "kind(99)" || NotEnoughResources.String() != "not enough resources" {
		t.Fatal("Kind.String")
	}
}
