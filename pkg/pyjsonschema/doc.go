// Package pyjsonschema is a JSON Schema validator that reproduces, byte for
// byte, the error that Python's jsonschema 4.10.3 (the version Debian 12
// ships) reports for the schema features OpenStack Placement uses.
//
// Why it exists: Placement validates request bodies and query strings with
// jsonschema.validate(instance, schema, format_checker=FormatChecker()) and
// renders the failure as
//
//	"JSON does not validate: %s" % str(exc)
//	"Invalid query string parameters: %s" % str(exc)
//
// where exc is best_match(validator.iter_errors(instance)). Placement's
// functional test suite asserts substrings of those messages, so a generic
// Go validator (different keyword order, different wording, different error
// choice) cannot pass it. This package mirrors the Python implementation:
//
//   - schemas are compiled from JSON text and keep key order, because
//     iter_errors walks a schema's keywords (and properties,
//     patternProperties) in dict insertion order;
//   - instances are decoded by Decode into an order-preserving Value whose
//     numbers remember whether they were written as integers (Python's json
//     module yields int or float), with Python json's error messages;
//   - validation follows Draft 2020-12 (jsonschema's default when a schema
//     has no $schema), including its type checker (1.0 is an integer, bools
//     are neither integers nor numbers) and the Python re.search semantics
//     of "pattern" and "patternProperties";
//   - the chosen error is best_match's pick (relevance function and descent
//     into anyOf/oneOf context) and ValidationError.Error is exactly
//     str(ValidationError), including the pprint'ed schema and instance.
//
// The golden differential tests in testdata/golden.json were produced by the
// real Python library; regenerate them with
//
//	/usr/bin/python3 testdata/gen.py > testdata/golden.json
//
// (needs Debian's python3-jsonschema 4.10.3). Go tests only read the file.
package pyjsonschema
