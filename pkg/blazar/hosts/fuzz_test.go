package hosts

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/leasehold/leasehold/pkg/compute/standalone"
	"github.com/leasehold/leasehold/pkg/errs"
)

// FuzzHostBody: any JSON object given to host-create is either accepted
// or refused as a bad request, never a panic or another kind of error, before any
// database work.
func FuzzHostBody(f *testing.F) {
	for _, s := range []string{
		`{"name": "c1"}`, `{"name": "c1", "vcpus": "8", "gpu": true, "cpu_info": {"arch": "x86_64"}}`,
		`{"name": "c1", "reservable": "False", "x": 1.5}`, `{"id": "7", "memory_mb": -1}`, `{"name": "", "a": null}`,
		`{"name": "c1", "gpu": [1]}`, `{"hypervisor_hostname": "h", "vcpus": 1e3}`,
	} {
		f.Add(s)
	}
	drv := standalone.New(nil)
	f.Fuzz(func(t *testing.T, s string) {
		dec := json.NewDecoder(bytes.NewReader([]byte(s)))
		dec.UseNumber()
		var body map[string]any
		if dec.Decode(&body) != nil {
			return
		}
		err := func() error {
			strs, err := bodyStrings(body)
			if err != nil {
				return err
			}
			_, caps, err := drv.DescribeHost(context.Background(), strs)
			if err != nil {
				return err
			}
			if _, err := takeReservable(caps); err != nil {
				return err
			}
			return checkCapabilityKeys(caps)
		}()
		if err == nil {
			return
		}
		if e := errs.As(err); e == nil || e.Kind != errs.BadRequest {
			t.Fatalf("body %s: error %v is not a bad request", s, err)
		}
	})
}
