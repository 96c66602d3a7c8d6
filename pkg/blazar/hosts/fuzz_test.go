package hosts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/leasehold/leasehold/pkg/compute/standalone"
)

// FuzzHostBody: any JSON object given to host-create is either accepted
// or refused with a 4xx error, never a panic or a 5xx, before any
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
		var se interface{ HTTPStatus() int }
		if !errors.As(err, &se) || se.HTTPStatus() < 400 || se.HTTPStatus() >= 500 {
			t.Fatalf("body %s: error %v is not a 4xx", s, err)
		}
	})
}
