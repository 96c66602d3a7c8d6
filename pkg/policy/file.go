package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// File is a parsed policy file: rule name → check string, as
// oslo.policy's policy.yaml or policy.json.
type File struct {
	Path  string
	Rules map[string]FileRule
}

// FileRule is one rule of a policy file.
type FileRule struct {
	// Check is the check string as written (the list-of-lists form is
	// kept in its printed text form).
	Check string
	Expr  Expr
	// Line is where the rule's name is, 1-based.
	Line int
}

// LoadFile reads and parses the policy file at path; "" is no file.
func LoadFile(path string) (*File, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	return ParseFile(path, data)
}

// ParseFile parses policy file data: a JSON object (when the text starts
// with "{") or a YAML mapping of rule names to check strings (a string,
// null or empty for always, or the legacy list of lists). Every error
// names the file and line.
func ParseFile(path string, data []byte) (*File, error) {
	f := &File{Path: path, Rules: map[string]FileRule{}}
	var err error
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		err = f.parseJSON(data)
	} else {
		err = f.parseYAML(data)
	}
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return f, nil
}

func (f *File) add(name, check string, expr Expr, line int) error {
	if prev, dup := f.Rules[name]; dup {
		return fmt.Errorf("line %d: rule %q already defined at line %d", line, name, prev.Line)
	}
	f.Rules[name] = FileRule{Check: check, Expr: expr, Line: line}
	return nil
}

func (f *File) addText(name, check string, line int) error {
	expr, err := Parse(check)
	if err != nil {
		return fmt.Errorf("line %d: rule %q: %w", line, name, err)
	}
	return f.add(name, check, expr, line)
}

func (f *File) addList(name string, list [][]string, line int) error {
	expr, err := ParseList(list)
	if err != nil {
		return fmt.Errorf("line %d: rule %q: %w", line, name, err)
	}
	return f.add(name, expr.String(), expr, line)
}

var yamlLineRE = strings.NewReplacer("yaml: ", "")

func (f *File) parseYAML(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return errors.New(yamlLineRE.Replace(err.Error()))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil // an empty file overrides nothing
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping of rule names to check strings", root.Line)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: a rule name must be a string", k.Line)
		}
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		switch {
		case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
			if err := f.addText(k.Value, "", k.Line); err != nil {
				return err
			}
		case v.Kind == yaml.ScalarNode && v.Tag == "!!str":
			if err := f.addText(k.Value, v.Value, k.Line); err != nil {
				return err
			}
		case v.Kind == yaml.SequenceNode:
			list, err := yamlList(v)
			if err != nil {
				return fmt.Errorf("rule %q: %w", k.Value, err)
			}
			if err := f.addList(k.Value, list, k.Line); err != nil {
				return err
			}
		default:
			return fmt.Errorf("line %d: rule %q: want a check string (quote values such as True or 1)", v.Line, k.Value)
		}
	}
	return nil
}

func yamlList(v *yaml.Node) ([][]string, error) {
	var out [][]string
	for _, item := range v.Content {
		switch {
		case item.Kind == yaml.ScalarNode && item.Tag == "!!str":
			out = append(out, []string{item.Value})
		case item.Kind == yaml.SequenceNode:
			var inner []string
			for _, s := range item.Content {
				if s.Kind != yaml.ScalarNode || s.Tag != "!!str" {
					return nil, fmt.Errorf("line %d: want a check string", s.Line)
				}
				inner = append(inner, s.Value)
			}
			out = append(out, inner)
		default:
			return nil, fmt.Errorf("line %d: want a check string or a list of them", item.Line)
		}
	}
	return out, nil
}

// parseJSON walks the object token by token so every rule and error has
// a line.
func (f *File) parseJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	lineAt := func(off int64) int { return 1 + bytes.Count(data[:min(int(off), len(data))], []byte("\n")) }
	fail := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("line %d: %v", lineAt(se.Offset), err)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("line %d: %v", lineAt(int64(len(data))), io.ErrUnexpectedEOF)
		}
		return fmt.Errorf("line %d: %v", lineAt(dec.InputOffset()), err)
	}
	if _, err := dec.Token(); err != nil { // the "{" ParseFile saw
		return fail(err)
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		name, _ := kt.(string)
		line := lineAt(dec.InputOffset())
		vt, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		switch v := vt.(type) {
		case nil:
			err = f.addText(name, "", line)
		case string:
			err = f.addText(name, v, line)
		case json.Delim:
			if v != '[' {
				return fmt.Errorf("line %d: rule %q: want a check string", lineAt(dec.InputOffset()), name)
			}
			var list [][]string
			if list, err = jsonList(dec, lineAt); err == nil {
				err = f.addList(name, list, line)
			}
		default:
			return fmt.Errorf("line %d: rule %q: want a check string", lineAt(dec.InputOffset()), name)
		}
		if err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fail(err)
			}
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // "}"
		return fail(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("line %d: text after the policy object", lineAt(dec.InputOffset()))
	}
	return nil
}

// jsonList reads the rest of a list of check strings or lists of them
// (the "[" has been read).
func jsonList(dec *json.Decoder, lineAt func(int64) int) ([][]string, error) {
	var out [][]string
	for {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch v := t.(type) {
		case string:
			out = append(out, []string{v})
			continue
		case json.Delim:
			if v == ']' {
				return out, nil
			}
			if v == '[' {
				var inner []string
				for {
					t, err := dec.Token()
					if err != nil {
						return nil, err
					}
					if d, ok := t.(json.Delim); ok && d == ']' {
						break
					}
					s, ok := t.(string)
					if !ok {
						return nil, fmt.Errorf("line %d: want a check string", lineAt(dec.InputOffset()))
					}
					inner = append(inner, s)
				}
				out = append(out, inner)
				continue
			}
		}
		return nil, fmt.Errorf("line %d: want a check string or a list of them", lineAt(dec.InputOffset()))
	}
}
