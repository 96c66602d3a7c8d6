#!/usr/bin/python3
"""Generate golden.json for the pyjsonschema differential tests.

Run with Debian 12's interpreter and python3-jsonschema 4.10.3:

    cd pkg/pyjsonschema && PYTHONHASHSEED=0 /usr/bin/python3 testdata/gen.py > testdata/golden.json

Each validate case holds a schema and an instance as JSON text (key order
matters) or a query as (key, value) pairs; the expected value is
str(exc) of jsonschema.validate(instance, schema,
format_checker=FormatChecker()), or null when valid. Decode cases hold
request bodies and the expected json.loads(body.decode()) result (repr and
pprint.pformat(width=72)) or str(error).
"""
import json
import pprint
import sys

import jsonschema
from jsonschema import FormatChecker, ValidationError

INV = r'''{"type": "object",
 "properties": {
  "resource_provider_generation": {"type": "integer"},
  "total": {"type": "integer", "maximum": 2147483647, "minimum": 1},
  "reserved": {"type": "integer", "maximum": 2147483647, "minimum": 0},
  "min_unit": {"type": "integer", "maximum": 2147483647, "minimum": 1},
  "max_unit": {"type": "integer", "maximum": 2147483647, "minimum": 1},
  "step_size": {"type": "integer", "maximum": 2147483647, "minimum": 1},
  "allocation_ratio": {"type": "number", "maximum": 3.40282e+38}},
 "required": ["total", "resource_provider_generation"],
 "additionalProperties": false}'''

ALLOC = r'''{"type": "object",
 "properties": {
  "allocations": {"type": "object", "minProperties": 1,
   "patternProperties": {"^[0-9a-fA-F-]{36}$": {
     "type": "object",
     "properties": {
       "generation": {"type": "integer"},
       "resources": {"type": "object", "minProperties": 1,
         "patternProperties": {"^[A-Z0-9_]+$": {"type": "integer", "minimum": 1}},
         "additionalProperties": false}},
     "required": ["resources"],
     "additionalProperties": false}},
   "additionalProperties": false},
  "project_id": {"type": "string", "minLength": 1, "maxLength": 255},
  "user_id": {"type": "string", "minLength": 1, "maxLength": 255},
  "consumer_generation": {"type": ["integer", "null"]},
  "consumer_type": {"type": "string", "pattern": "^[A-Z0-9_]+$", "minLength": 1, "maxLength": 255}},
 "required": ["allocations", "project_id", "user_id", "consumer_generation"],
 "additionalProperties": false}'''

QUERY = r'''{"type": "object",
 "properties": {
  "resources": {"type": "string"},
  "limit": {"type": "string", "pattern": "^[1-9][0-9]*$"},
  "required": {"type": "string"},
  "member_of": {"type": "string"},
  "in_tree": {"type": "string", "format": "uuid"},
  "group_policy": {"type": "string", "enum": ["none", "isolate"]}},
 "patternProperties": {
  "^resources[1-9][0-9]*$": {"type": "string"},
  "^required[1-9][0-9]*$": {"type": "string"},
  "^member_of[1-9][0-9]*$": {"type": "string"}},
 "required": ["resources"],
 "additionalProperties": false}'''

QUERY_NOPP = r'''{"type": "object",
 "properties": {"name": {"type": "string", "maxLength": 200},
  "uuid": {"type": "string", "format": "uuid"},
  "member_of": {"type": "string"}},
 "additionalProperties": false}'''

TRAITS = r'''{"type": "object",
 "properties": {
  "traits": {"type": "array", "items": {"type": "string", "pattern": "^[A-Z0-9_]+$"}},
  "resource_provider_generation": {"type": "integer"}},
 "required": ["traits", "resource_provider_generation"],
 "additionalProperties": false}'''

AGG = r'''{"type": "object",
 "properties": {
  "aggregates": {"type": "array", "items": {"type": "string", "format": "uuid"}, "uniqueItems": true},
  "resource_provider_generation": {"type": "integer"}},
 "required": ["aggregates", "resource_provider_generation"],
 "additionalProperties": false}'''

RP = r'''{"type": "object",
 "properties": {
  "name": {"type": "string", "maxLength": 200},
  "uuid": {"type": "string", "format": "uuid"},
  "parent_provider_uuid": {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]}},
 "required": ["name"],
 "additionalProperties": false}'''

RC = r'''{"type": "object",
 "properties": {"name": {"type": "string", "pattern": "^CUSTOM_[A-Z0-9_]+$", "maxLength": 255}},
 "required": ["name"], "additionalProperties": false}'''

RESHAPE = r'''{"type": "object",
 "properties": {
  "inventories": {"type": "object",
   "patternProperties": {"^[0-9a-fA-F-]{36}$": {"type": "object",
     "properties": {"resource_provider_generation": {"type": "integer"},
       "inventories": {"type": "object", "patternProperties": {"^[A-Z0-9_]+$": {"type": "object",
         "properties": {"total": {"type": "integer", "minimum": 1}}, "required": ["total"],
         "additionalProperties": false}}, "additionalProperties": false}},
     "required": ["resource_provider_generation", "inventories"], "additionalProperties": false}},
   "additionalProperties": false},
  "allocations": {"type": "object"}},
 "required": ["inventories", "allocations"],
 "additionalProperties": false}'''

U1 = "30b4a8b6-59a4-4b5f-a6a0-97b2bd4e9ac5"
U2 = "a6b5d0f2-2a38-4c2e-9bb5-6d4b0a6e0f71"

V = []  # (name, schema, instance-json)
Q = []  # (name, schema, pairs)


def v(name, schema, inst):
    V.append((name, schema, inst))


def q(name, schema, pairs):
    Q.append((name, schema, pairs))


# --- inventory-like: minimum/maximum/type/required/additionalProperties
v("inv-valid", INV, '{"total": 1, "resource_provider_generation": 0}')
v("inv-total-zero", INV, '{"total": 0, "resource_provider_generation": 0}')
v("inv-total-neg", INV, '{"total": -1, "resource_provider_generation": 0}')
v("inv-total-str", INV, '{"total": "x", "resource_provider_generation": 0}')
v("inv-total-float-integral", INV, '{"total": 1.0, "resource_provider_generation": 0}')
v("inv-total-float", INV, '{"total": 1.5, "resource_provider_generation": 0}')
v("inv-total-bool", INV, '{"total": true, "resource_provider_generation": 0}')
v("inv-total-null", INV, '{"total": null, "resource_provider_generation": 0}')
v("inv-total-too-big", INV, '{"total": 2147483648, "resource_provider_generation": 0}')
v("inv-total-huge-int", INV, '{"total": 123456789012345678901234567890, "resource_provider_generation": 0}')
v("inv-total-huge-float", INV, '{"total": 1e400, "resource_provider_generation": 0}')
v("inv-missing-total", INV, '{"resource_provider_generation": 0}')
v("inv-missing-both", INV, '{"reserved": 0}')
v("inv-empty", INV, '{}')
v("inv-extra", INV, '{"total": 1, "resource_provider_generation": 0, "nam": 1}')
v("inv-extras", INV, '{"zz": 1, "total": 1, "resource_provider_generation": 0, "aa": 1}')
v("inv-extra-and-min", INV, '{"total": 0, "resource_provider_generation": 0, "nam": 1}')
v("inv-min-and-required", INV, '{"total": 0}')
v("inv-ratio-big", INV, '{"total": 1, "resource_provider_generation": 0, "allocation_ratio": 1e39}')
v("inv-ratio-str", INV, '{"total": 1, "resource_provider_generation": 0, "allocation_ratio": "1.0"}')
v("inv-ratio-ok", INV, '{"total": 1, "resource_provider_generation": 0, "allocation_ratio": 16.0}')
v("inv-reserved-neg", INV, '{"total": 1, "resource_provider_generation": 0, "reserved": -5}')
v("inv-step-zero", INV, '{"total": 1, "resource_provider_generation": 0, "step_size": 0}')
v("inv-max-unit-big", INV, '{"total": 1, "resource_provider_generation": 0, "max_unit": 2147483648}')
v("inv-array", INV, '[1, 2]')
v("inv-string", INV, '"total"')
v("inv-two-type-errors", INV, '{"total": "a", "reserved": "b", "resource_provider_generation": 0}')
v("inv-gen-float", INV, '{"total": 1, "resource_provider_generation": 2.5}')
v("inv-neg-zero", INV, '{"total": -0.0, "resource_provider_generation": 0}')
v("inv-small-float", INV, '{"total": 1e-7, "resource_provider_generation": 0}')

# --- allocations-like: patternProperties, minProperties, nested paths
v("alloc-valid", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}' % U1)
v("alloc-empty-allocs", ALLOC, '{"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": null}')
v("alloc-bad-key", ALLOC, '{"allocations": {"not-a-uuid": {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}')
v("alloc-bad-keys", ALLOC, '{"allocations": {"b": {}, "a": {}}, "project_id": "p", "user_id": "u", "consumer_generation": null}')
v("alloc-empty-resources", ALLOC, '{"allocations": {"%s": {"resources": {}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}' % U1)
v("alloc-lower-rc", ALLOC, '{"allocations": {"%s": {"resources": {"vcpu": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}' % U1)
v("alloc-zero-amount", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 0}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}' % U1)
v("alloc-missing-resources", ALLOC, '{"allocations": {"%s": {"generation": 1}}, "project_id": "p", "user_id": "u", "consumer_generation": null}' % U1)
v("alloc-bad-field", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 1}, "bad_field": 1}}, "project_id": "p", "user_id": "u", "consumer_generation": null}' % U1)
v("alloc-empty-project", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 1}}}, "project_id": "", "user_id": "u", "consumer_generation": null}' % U1)
v("alloc-long-project", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 1}}}, "project_id": "%s", "user_id": "u", "consumer_generation": null}' % (U1, "x" * 256))
v("alloc-long-project-words", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 1}}}, "project_id": "%s", "user_id": "u", "consumer_generation": null}' % (U1, "word " * 60))
v("alloc-gen-str", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": "x"}' % U1)
v("alloc-missing-gen", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u"}' % U1)
v("alloc-consumer-type-lower", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": 1, "consumer_type": "instance"}' % U1)
v("alloc-consumer-type-newline", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": 1, "consumer_type": "INSTANCE\\n"}' % U1)
v("alloc-consumer-type-empty", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u", "consumer_generation": 1, "consumer_type": ""}' % U1)
v("alloc-deep-vs-shallow", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 0}}}, "project_id": "", "user_id": "u", "consumer_generation": null}' % U1)
v("alloc-two-consumers", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 0}}, "%s": {"resources": {"DISK_GB": "x"}}}, "project_id": "p", "user_id": "u", "consumer_generation": null}' % (U1, U2))
v("alloc-unicode-project", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 1}}}, "project_id": "%s", "user_id": "u", "consumer_generation": null}' % (U1, "\u00e9" * 256))

# --- traits / aggregates / resource providers / resource classes
v("traits-not-array", TRAITS, '{"traits": "invalid_type", "resource_provider_generation": 1}')
v("traits-gen-str", TRAITS, '{"traits": [], "resource_provider_generation": "invalid_generation"}')
v("traits-bad-item", TRAITS, '{"traits": ["HW_CPU", "lower"], "resource_provider_generation": 1}')
v("traits-missing-gen", TRAITS, '{"traits": []}')
v("traits-extra", TRAITS, '{"traits": [], "resource_provider_generation": 1, "x": 1}')
v("agg-dupes", AGG, '{"aggregates": ["%s", "%s"], "resource_provider_generation": 1}' % (U1, U1))
v("agg-bad-uuid", AGG, '{"aggregates": ["not-a-uuid"], "resource_provider_generation": 1}')
v("agg-uuid-nodash", AGG, '{"aggregates": ["%s"], "resource_provider_generation": 1}' % U1.replace("-", ""))
v("agg-uuid-upper", AGG, '{"aggregates": ["%s"], "resource_provider_generation": 1}' % U1.upper())
v("agg-uuid-urn", AGG, '{"aggregates": ["urn:uuid:%s"], "resource_provider_generation": 1}' % U1)
v("agg-uuid-braces", AGG, '{"aggregates": ["{%s}"], "resource_provider_generation": 1}' % U1)
v("agg-uuid-0x", AGG, '{"aggregates": ["0x4a8b6-59a4-4b5f-a6a0-97b2bd4e9ac5ab"], "resource_provider_generation": 1}')
v("agg-uuid-underscore", AGG, '{"aggregates": ["30b4a8b6-59a4-4b5f-a6a0-97b2bd4e9_c5"], "resource_provider_generation": 1}')
v("agg-uuid-sign", AGG, '{"aggregates": ["+0b4a8b6-59a4-4b5f-a6a0-97b2bd4e9ac5"], "resource_provider_generation": 1}')
v("agg-uuid-g", AGG, '{"aggregates": ["30b4a8b6-59a4-4b5f-a6a0-97b2bd4e9acg"], "resource_provider_generation": 1}')
v("agg-dup-and-bad", AGG, '{"aggregates": ["x", "x"], "resource_provider_generation": 1}')
v("agg-old-format", AGG, '["%s"]' % U1)
v("rp-name-long", RP, '{"name": "%s"}' % ("n" * 201))
v("rp-bad-uuid", RP, '{"name": "a", "uuid": "bogus"}')
v("rp-uuid-int", RP, '{"name": "a", "uuid": 5}')
v("rp-parent-bad", RP, '{"name": "a", "parent_provider_uuid": "bad"}')
v("rp-parent-int", RP, '{"name": "a", "parent_provider_uuid": 5}')
v("rp-parent-null", RP, '{"name": "a", "parent_provider_uuid": null}')
v("rp-parent-ok", RP, '{"name": "a", "parent_provider_uuid": "%s"}' % U1)
v("rp-missing-name", RP, '{"uuid": "%s"}' % U1)
v("rc-bad-pattern", RC, '{"name": "FOO"}')
v("rc-too-long", RC, '{"name": "CUSTOM_%s"}' % ("A" * 250))
v("rc-quote", RC, '{"name": "it\'s"}')
v("rc-both-quotes", RC, '{"name": "it\'s \\"x\\""}')
v("rc-nonprintable", RC, '{"name": "a\\u00a0b\\u0007c\\u200bd\\u00e9\\ud83d\\ude00\\u007f"}')
v("reshape-deep", RESHAPE, '{"inventories": {"%s": {"resource_provider_generation": 1, "inventories": {"VCPU": {"total": 0}}}}, "allocations": {}}' % U1)
v("reshape-bad-field", RESHAPE, '{"inventories": {}, "allocations": {}, "bad_field": 1}')

# --- generic keyword coverage and best_match tie rules
v("order-required-first", '{"required": ["a"], "minProperties": 2}', '{}')
v("order-minprops-first", '{"minProperties": 2, "required": ["a"]}', '{}')
v("maxprops", '{"maxProperties": 1}', '{"a": 1, "b": [1, 2]}')
v("type-list", '{"type": ["string", "null"]}', '1')
v("type-bool-number", '{"type": "number"}', 'true')
v("type-bool-integer", '{"type": "integer"}', 'false')
v("type-null", '{"type": "null"}', '0')
v("type-matches-tiebreak", '{"properties": {"a": {"type": "string", "minLength": 5}, "b": {"type": "integer"}}}', '{"a": "x", "b": "y"}')
v("type-matches-tiebreak2", '{"properties": {"b": {"type": "integer"}, "a": {"type": "string", "minLength": 5}}}', '{"a": "x", "b": "y"}')
v("weak-anyof-loses", '{"anyOf": [{"type": "string"}, {"type": "integer"}], "minProperties": 3}', '{}')
v("anyof-deeper-context", '{"anyOf": [{"properties": {"a": {"type": "integer"}}}, {"required": ["b"]}]}', '{"a": "x"}')
v("anyof-equal-context", '{"anyOf": [{"type": "string"}, {"type": "integer"}]}', '[]')
v("anyof-nested", '{"anyOf": [{"anyOf": [{"properties": {"a": {"properties": {"b": {"type": "string"}}}}}, {"type": "array"}]}, {"type": "null"}]}', '{"a": {"b": 1}}')
v("anyof-in-props", '{"properties": {"x": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "string", "pattern": "^a"}]}}}', '{"x": "bcd"}')
v("oneof-none", '{"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]}', '3')
v("oneof-many", '{"oneOf": [{"type": "integer"}, {"minimum": 2}, {"type": "number"}]}', '3')
v("oneof-ok", '{"oneOf": [{"type": "integer"}, {"type": "string"}]}', '3')
v("allof", '{"allOf": [{"type": "integer"}, {"minimum": 5}, {"maximum": 3}]}', '4')
v("not", '{"not": {"type": "integer", "minimum": 1}}', '3')
v("not-true", '{"not": true}', '"x"')
v("const", '{"const": {"a": [1, "b"]}}', '{"a": [1, "c"]}')
v("const-bool-vs-int", '{"const": 1}', 'true')
v("const-ok-float", '{"const": 1}', '1.0')
v("enum-int-bool", '{"enum": [1, 2]}', 'true')
v("enum-bool-int", '{"enum": [true]}', '1')
v("enum-float", '{"enum": [1, 2]}', '1.0')
v("enum-list-bool", '{"enum": [[1]]}', '[true]')
v("enum-dict", '{"enum": [{"a": 1}, null]}', '{"a": 2}')
v("enum-none", '{"enum": ["none", "isolate"]}', '"bogus"')
v("unique-int-bool", '{"uniqueItems": true}', '[1, true]')
v("unique-int-float", '{"uniqueItems": true}', '[1, 1.0]')
v("unique-dicts", '{"uniqueItems": true}', '[{"a": 1, "b": 2}, {"b": 2, "a": 1}]')
v("unique-false", '{"uniqueItems": false}', '[1, 1]')
v("min-items", '{"minItems": 1}', '[]')
v("max-items", '{"maxItems": 2}', '[1, 2, 3]')
v("items-path", '{"items": {"type": "object", "required": ["x"]}}', '[{"x": 1}, {}, {"y": 2}]')
v("prefix-items-false", '{"prefixItems": [{"type": "integer"}], "items": false}', '[1, 2, 3]')
v("prefix-items-bad", '{"prefixItems": [{"type": "integer"}, {"type": "string"}]}', '[1, 2]')
v("contains-none", '{"contains": {"type": "string"}}', '[1, 2]')
v("contains-min", '{"contains": {"type": "string"}, "minContains": 2}', '["a", 2]')
v("contains-max", '{"contains": {"type": "string"}, "maxContains": 1}', '["a", "b"]')
v("dependent-required", '{"dependentRequired": {"a": ["b", "c"]}}', '{"a": 1, "c": 2}')
v("dependent-schemas", '{"dependentSchemas": {"a": {"required": ["zz"]}}}', '{"a": 1}')
v("if-then", '{"if": {"type": "integer"}, "then": {"minimum": 10}, "else": {"type": "string"}}', '5')
v("if-else", '{"if": {"type": "integer"}, "then": {"minimum": 10}, "else": {"type": "string"}}', '[5]')
v("property-names", '{"propertyNames": {"maxLength": 3}}', '{"abcd": 1}')
v("ref-defs", '{"$defs": {"pos": {"type": "integer", "minimum": 1}}, "properties": {"a": {"$ref": "#/$defs/pos"}}}', '{"a": 0}')
v("ref-definitions", '{"definitions": {"s": {"type": "string"}}, "items": {"$ref": "#/definitions/s"}}', '["a", 1]')
v("ref-recursive", '{"type": "object", "properties": {"child": {"$ref": "#"}, "v": {"type": "integer"}}}', '{"child": {"child": {"v": "x"}}}')
v("false-schema", '{"properties": {"a": false}}', '{"a": 1}')
v("false-root", 'false', '{"a": [1]}')
v("additional-schema", '{"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}', '{"a": "x", "b": "y"}')
v("pattern-props-empty", '{"patternProperties": {}, "additionalProperties": false}', '{"a": 1}')
v("pattern-props-multi", '{"patternProperties": {"^b": {}, "^a": {"type": "integer"}}, "additionalProperties": false}', '{"a1": "x", "c": 1, "d": 2}')
v("pattern-search", '{"pattern": "b+"}', '"abbbc"')
v("pattern-fail", '{"pattern": "^b+$"}', '"abbbc"')
v("pattern-dollar-newline", '{"pattern": "^b+$"}', '"bb\\n"')
v("pattern-dollar-two-newlines", '{"pattern": "^b+$"}', '"bb\\n\\n"')
v("pattern-digit-unicode", '{"pattern": "^\\\\d+$"}', '"\\u0663\\u0664"')
v("pattern-word-unicode", '{"pattern": "^\\\\w+$"}', '"\\u00e9t\\u00e9_1"')
v("pattern-Z", '{"pattern": "a\\\\Z"}', '"a\\n"')
v("minlength-unicode", '{"minLength": 3}', '"\\ud83d\\ude00\\u00e9"')
v("maxlength-unicode", '{"maxLength": 1}', '"\\u00e9\\u00e9"')
v("exclusive-min", '{"exclusiveMinimum": 5}', '5')
v("exclusive-max", '{"exclusiveMaximum": 5.5}', '5.5')
v("minimum-float-limit", '{"minimum": 0.5}', '0')
v("maximum-big-int", '{"maximum": 9007199254740992}', '9007199254740993')
v("maximum-float-vs-int", '{"maximum": 9007199254740992.0}', '9007199254740993')
v("multiple-of-int", '{"multipleOf": 3}', '10')
v("multiple-of-float", '{"multipleOf": 0.5}', '1.25')
v("multiple-of-float-ok", '{"multipleOf": 0.5}', '1.5')
v("format-unknown", '{"format": "no-such-format"}', '"x"')
v("format-ipv4", '{"format": "ipv4"}', '"1.2.3.256"')
v("format-ipv4-leading-zero", '{"format": "ipv4"}', '"01.2.3.4"')
v("format-ipv6", '{"format": "ipv6"}', '"::1::"')
v("format-email", '{"format": "email"}', '"nobody"')
v("format-date", '{"format": "date"}', '"2021-02-30"')
v("format-date-ok", '{"format": "date"}', '"2021-02-28"')
v("float-reprs", '{"type": "string"}', '[1e16, 1e-5, 0.0001, 123456789.0, 0.1, -0.0, 1.5e300, 1e22, 12345678901234567.0]')
v("pprint-wide-instance", '{"type": "string"}', '{"a": [%s], "b": {"c": "%s", "d": [[1, 2], {"e": null}]}}' % (", ".join(str(i) for i in range(40)), "y" * 50))
v("pprint-long-string", '{"maxLength": 5}', '"%s"' % ("lorem ipsum dolor sit amet " * 8))
v("pprint-multiline-string", '{"maxLength": 5}', '"%s"' % ("first line of text that goes on and on\\nsecond line " * 3))
v("pprint-list-of-strings", '{"maxItems": 1}', '[%s]' % ", ".join('"%s"' % ("s%02d" % i * 4) for i in range(12)))
v("pprint-nested-schema", '{"properties": {"x": {"type": "object", "properties": {"a_fairly_long_property_name": {"type": "string", "enum": ["one", "two", "three", "four", "five"]}, "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}, "required": ["a_fairly_long_property_name"]}}}', '{"x": {}}')
v("nested-index-path", '{"properties": {"a": {"items": {"properties": {"b": {"items": {"type": "integer"}}}}}}}', '{"a": [{"b": [1]}, {"b": [2, "z"]}]}')
v("empty-schema", '{}', '[1, {"a": null}]')
v("true-schema", 'true', '1')
v("unknown-keywords-ignored", '{"title": "x", "description": "y", "default": 3, "type": "integer"}', '"s"')

# --- query strings: dict(req.GET)
q("q-valid", QUERY, [["resources", "VCPU:1"]])
q("q-missing-resources", QUERY, [["limit", "1"]])
q("q-limit-zero", QUERY, [["resources", "VCPU:1"], ["limit", "0"]])
q("q-limit-newline", QUERY, [["resources", "VCPU:1"], ["limit", "5\n"]])
q("q-group-policy", QUERY, [["resources", "VCPU:1"], ["group_policy", "bogus"]])
q("q-resources01", QUERY, [["resources", "VCPU:1"], ["resources01", "VCPU:1"]])
q("q-two-bad", QUERY, [["resources", "VCPU:1"], ["resources1@", "x"], ["group_policy", "none"], ["resources_0", "x"]])
q("q-in-tree-bad", QUERY, [["resources", "VCPU:1"], ["in_tree", "bad"]])
q("q-repeat-last-wins", QUERY, [["limit", "0"], ["resources", "VCPU:1"], ["limit", "5"]])
q("q-repeat-last-bad", QUERY, [["limit", "5"], ["resources", "VCPU:1"], ["limit", "x"]])
q("q-member-of-unexpected", QUERY_NOPP, [["member_of", "x"], ["bogus", "1"]])
q("q-nopp-extras", QUERY_NOPP, [["zeta", "1"], ["alpha", "2"]])
q("q-name-long", QUERY_NOPP, [["name", "n" * 201]])
q("q-uuid-bad", QUERY_NOPP, [["uuid", "not-a-uuid"]])
q("q-empty", QUERY_NOPP, [])

DECODE = [
    '', ' ', '{', '{"a"', '{"a":', '{"a":1', '{"a":1,', '{"a":1,}', '[', '[1', '[1,', '[1,]',
    '[1 2]', '{"a" 1}', '{1:2}', '"abc', '"a\\', '"a\\x"', '"\\u12"', '"\\u12zz"',
    '"\\ud800\\u12zz"', '"a\nb"', '01', '1 2', '-', '-a', '1.', '1.e5', '1e', '1e+', 'tru', 'nul',
    '\ufeff{}', '{"a":1}x', '[1,2,]', '"\\x"', '\t{"\u00e9":1, "b":}', '[-]', '{"a":[1,{"b":}]}',
    '{"a":\n 1,\n "b" 2}', '1' * 4301, '-' + '1' * 4300,
    # successful decodes: repr and pformat
    '{"b": 1, "a": [1, 2.5, true, false, null], "c": {"z": "x", "y": "\'"}}',
    '{"dup": 1, "other": 2, "dup": 3}',
    '[1.0, 10000000000000000.0, 1e-5, 0.0001, 123456789012345678901234567890, -0, -0.0, 1E2, 1.5e400]',
    'NaN', '-Infinity', '[Infinity]',
    '"\\u0000\\u001f\\u007f\\u0080\\u00a0\\u00ff\\u0100\\u2028\\ud83d\\ude00\\ud800x\\t\\\\"',
    '{"%s": [%s]}' % ("k" * 30, ", ".join('"%s"' % ("v" * i) for i in range(1, 15))),
]
DECODE_BYTES = [b'\xff', b'a\x80', b'\xe2\x82x', b'\xe2\x82', b'\xed\xa0\x80', b'\xf0\x9f\x98',
                b'\xc0\xaf', b'\xf4\x90\x80\x80', b'ab\xe2', b'"\xc3\xa9"']


PALETTE = [0, -1, 1, 1.5, 1.0, 2147483648, "x", "", "lower", "VCPU", "CUSTOM_X",
           None, True, False, [], {}, [1, 1], ["A", "b"], {"VCPU": 0}, {"resources": {}},
           "y" * 80, U1, U2, "not-a-uuid", {"k": [1, {"z": None}]}]
KEYS = ["total", "reserved", "resources", "project_id", "user_id", "consumer_generation",
        "consumer_type", "allocations", "traits", "aggregates", "name", "uuid", "generation",
        "VCPU", "DISK_GB", "bad_field", "nam", U2, "inventories", "resource_provider_generation"]


def containers(value, path=()):
    if isinstance(value, (dict, list)):
        yield path, value
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, sub in items:
            yield from containers(sub, path + (k,))


def mutate(value, rng):
    import copy
    value = copy.deepcopy(value)
    for _ in range(rng.randint(1, 3)):
        conts = list(containers(value))
        if not conts:
            return rng.choice(PALETTE)
        _, c = rng.choice(conts)
        op = rng.random()
        if isinstance(c, dict):
            if c and op < 0.3:
                del c[rng.choice(list(c))]
            elif c and op < 0.7:
                c[rng.choice(list(c))] = copy.deepcopy(rng.choice(PALETTE))
            else:
                c[rng.choice(KEYS)] = copy.deepcopy(rng.choice(PALETTE))
        else:
            if c and op < 0.5:
                c[rng.randrange(len(c))] = copy.deepcopy(rng.choice(PALETTE))
            else:
                c.append(copy.deepcopy(rng.choice(PALETTE)))
    return value


def add_random_cases():
    import random
    rng = random.Random(20240611)
    bases = [
        ("inv", INV, '{"total": 1, "resource_provider_generation": 0, "reserved": 0, "allocation_ratio": 1.0}'),
        ("alloc", ALLOC, '{"allocations": {"%s": {"resources": {"VCPU": 1, "DISK_GB": 5}}}, "project_id": "p", "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE"}' % U1),
        ("traits", TRAITS, '{"traits": ["HW_CPU_X86_VMX", "CUSTOM_MAGIC"], "resource_provider_generation": 1}'),
        ("agg", AGG, '{"aggregates": ["%s", "%s"], "resource_provider_generation": 1}' % (U1, U2)),
        ("rp", RP, '{"name": "cn1", "uuid": "%s", "parent_provider_uuid": "%s"}' % (U1, U2)),
        ("reshape", RESHAPE, '{"inventories": {"%s": {"resource_provider_generation": 1, "inventories": {"VCPU": {"total": 4}}}}, "allocations": {}}' % U1),
    ]
    for prefix, schema, base in bases:
        seen = set()
        n = 0
        while n < 25:
            inst = json.dumps(mutate(json.loads(base), rng))
            if inst in seen:
                continue
            seen.add(inst)
            n += 1
            v("rand-%s-%02d" % (prefix, n), schema, inst)


def random_value(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.4:
        return rng.choice([0, -7, 3.25, 1e20, 1e-7, True, False, None, "", "s", "it's",
                           "with space and more words " * rng.randint(0, 4), "\u00e9\n\tx",
                           12345678901234567890])
    if r < 0.7:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 7))]
    return {rng.choice(KEYS) + ("_" * rng.randint(0, 9)): random_value(rng, depth + 1)
            for _ in range(rng.randint(0, 6))}


def random_decode_cases():
    import random
    rng = random.Random(7)
    return [json.dumps(random_value(rng)) for _ in range(60)]


def run(schema_text, instance):
    schema = json.loads(schema_text)
    try:
        jsonschema.validate(instance, schema, format_checker=FormatChecker())
    except ValidationError as e:
        validator = jsonschema.validators.validator_for(schema)(
            schema, format_checker=FormatChecker())
        every = [err.message for err in validator.iter_errors(instance)]
        return {"error": str(e), "message": e.message, "all_messages": every,
                "validator": e.validator, "path": list(e.relative_path),
                "schema_path": list(e.relative_schema_path)}
    return {"error": None}


def main():
    add_random_cases()
    out = {"jsonschema_version": "4.10.3", "validate": [], "decode": []}
    names = set()
    for name, schema, inst in V:
        assert name not in names, name
        names.add(name)
        rec = {"name": name, "schema": schema, "instance": inst}
        rec.update(run(schema, json.loads(inst)))
        out["validate"].append(rec)
    for name, schema, pairs in Q:
        assert name not in names, name
        names.add(name)
        d = {}
        for k, val in pairs:
            d[k] = val
        rec = {"name": name, "schema": schema, "query": pairs}
        rec.update(run(schema, d))
        out["validate"].append(rec)
    for body in [t.encode("utf-8") for t in DECODE + random_decode_cases()] + DECODE_BYTES:
        rec = {"hex": body.hex()}
        try:
            val = json.loads(body.decode("utf-8"))
        except ValueError as e:
            rec["error"] = str(e)
        else:
            rec["repr"] = repr(val)
            rec["pformat"] = pprint.pformat(val, width=72)
        out["decode"].append(rec)
    json.dump(out, sys.stdout, indent=1, ensure_ascii=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
