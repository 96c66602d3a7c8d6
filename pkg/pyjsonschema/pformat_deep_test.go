package pyjsonschema

import (
	"runtime"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// pformatWholeRepr is pformat as it was written first, after pprint:
// the whole repr of every value it meets. The bounded check must print
// the same.
func pformatWholeRepr(v Value) string {
	p := &refPrinter{printer{width: 72}}
	p.format(v, 0, 0, 0)
	return p.b.String()
}

type refPrinter struct{ printer }

func (p *refPrinter) format(v Value, indent, allowance, level int) {
	rep := reprSorted(v)
	if runeLen(rep) > p.width-indent-allowance {
		switch v.kind {
		case ObjectKind:
			p.b.WriteByte('{')
			items := sortedMembers(v.obj.members)
			if len(items) > 0 {
				allowance++
				indent++
				delimnl := ",\n" + strings.Repeat(" ", indent)
				for i, m := range items {
					last := i == len(items)-1
					k := pyStrRepr(m.Key)
					p.b.WriteString(k + ": ")
					a := 1
					if last {
						a = allowance
					}
					p.format(m.Value, indent+runeLen(k)+2, a, level+1)
					if !last {
						p.b.WriteString(delimnl)
					}
				}
			}
			p.b.WriteByte('}')
			return
		case ArrayKind:
			p.b.WriteByte('[')
			allowance++
			indent++
			delimnl := ",\n" + strings.Repeat(" ", indent)
			for i, e := range v.arr {
				if i > 0 {
					p.b.WriteString(delimnl)
				}
				a := 1
				if i == len(v.arr)-1 {
					a = allowance
				}
				p.format(e, indent, a, level+1)
			}
			p.b.WriteByte(']')
			return
		case StringKind:
			p.str(v.s, indent, allowance, level+1)
			return
		}
	}
	p.b.WriteString(rep)
}

// TestRapidPformatBoundedSameAsWholeRepr: deciding "fits in the width"
// from a repr cut at the width prints what the whole repr did.
func TestRapidPformatBoundedSameAsWholeRepr(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, err := Decode([]byte(genJSON(4).Draw(t, "json")))
		if err != nil {
			t.Skip(err)
		}
		if got, want := pformat(v), pformatWholeRepr(v); got != want {
			t.Fatalf("pformat:\n%s\nwhole-repr pformat:\n%s", got, want)
		}
	})
}

// TestPformatDeepIsLinear: describing a deeply nested instance (a 400's
// "On instance" for a fuzzed body 8,000 objects deep) allocates in
// proportion to its size; the whole repr at every level allocated
// hundreds of megabytes and took seconds (the HTTP fuzzer's hang on
// POST /resource_providers).
func TestPformatDeepIsLinear(t *testing.T) {
	const depth = 8000
	for _, doc := range []string{
		strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth),
		strings.Repeat(`[`, depth) + "1" + strings.Repeat("]", depth),
	} {
		v, err := Decode([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out := pformat(v)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64*uint64(len(doc))+(1<<20) {
			t.Errorf("pformat of a %d-deep value allocated %d bytes for %d bytes of output", depth, alloc, len(out))
		}
		if !strings.HasSuffix(strings.TrimSpace(out), strings.Repeat(doc[len(doc)-1:], 10)) {
			t.Errorf("pformat output does not close the nesting: …%s", out[max(0, len(out)-40):])
		}
	}
}
