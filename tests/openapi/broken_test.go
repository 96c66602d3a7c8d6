package openapi_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// breakage is one deliberate error in the description: old, which must
// occur exactly once in etc/openapi/blazar-v1.yaml, becomes new.
type breakage struct {
	name, old, new string
}

// breakages each break one field or operation the recorded traffic
// exercises, so the traffic must no longer validate against the result.
var breakages = []breakage{
	{"instance reservation without flavor_id",
		"        flavor_id:\n          description: The private flavor's id, which is the reservation id.\n          type: string\n", ""},
	{"instance affinity never null",
		"          description: true, false, or null (any split).\n          type: [boolean, \"null\"]",
		"          description: true, false, or null (any split).\n          type: boolean"},
	{"instance slots without disk",
		"        disk_gb: { type: integer, minimum: 0 }", "        disk_gb: { type: integer, minimum: 1 }"},
	{"earliest window in created_at's format",
		"        start_date: { $ref: \"#/components/schemas/Date\" }\n        end_date: { $ref: \"#/components/schemas/Date\" }\n        reservations:\n          description: In request order",
		"        start_date: { $ref: \"#/components/schemas/Stamp\" }\n        end_date: { $ref: \"#/components/schemas/Date\" }\n        reservations:\n          description: In request order"},
	{"lease create without duration",
		"        duration:\n          description: With start_date \"earliest\" (a Leasehold extension), the lease's length.\n          $ref: \"#/components/schemas/Duration\"\n", ""},
	{"filter answer's rejections as a list",
		"          description: A reason a person can act on, by rejected host name.\n          type: object",
		"          description: A reason a person can act on, by rejected host name.\n          type: array"},
	// (The filter request is open, unknown keys being ignored by design, so
	// a field can be broken by its type, not by leaving it out.)
	{"filter request's explain never true",
		"        explain:\n          type: [\"boolean\", \"null\"]\n    FilterResult:",
		"        explain:\n          type: \"null\"\n    FilterResult:"},
	{"scheduler filter at another path", "  /v1/scheduler/filter:\n", "  /v1/scheduler/filters:\n"},
	{"force=1 refused", "pattern: '^([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]|1|0)?$'", "pattern: '^([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]|0)?$'"},
	{"no 409 for the earliest window", "        \"409\":\n          description: No window fits", "        \"419\":\n          description: No window fits"},
}

// checkBrokenDescriptions validates log against each broken description
// and fails when one of them still accepts every exchange: the test
// would not catch that mistake in the real description.
// allOps also asks each operation to have a successful answer in log
// (false for a log covering a few operations).
func checkBrokenDescriptions(t *testing.T, log []*exchange, list []breakage, allOps bool) {
	raw, err := os.ReadFile(blazarSpecPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range list {
		t.Run(b.name, func(t *testing.T) {
			if n := strings.Count(string(raw), b.old); n != 1 {
				t.Fatalf("the text to break occurs %d times in %s, want once: %q", n, blazarSpecPath, b.old)
			}
			s, err := parseSpec([]byte(strings.Replace(string(raw), b.old, b.new, 1)))
			if err != nil {
				t.Fatal(err)
			}
			ch := newChecker(t, s)
			var first string
			n := 0
			ch.errorf = func(format string, args ...any) {
				if n == 0 {
					first = fmt.Sprintf(format, args...)
				}
				n++
			}
			if allOps {
				validate(ch, log)
			} else {
				for _, e := range log {
					ch.check(e)
				}
			}
			if n == 0 {
				t.Fatalf("the recorded traffic still validates against the description broken this way")
			}
			t.Logf("%d mismatches, the first: %.300s", n, first)
		})
	}
}
