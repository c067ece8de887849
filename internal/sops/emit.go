package sops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// emitYAML writes the opened documents, without their comments (SOPS
// encrypts those too, and they do not matter to a deploy).
func emitYAML(docs []*yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return nil, fmt.Errorf("writing the opened document: %v", err)
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// emitBinary returns the opened "data" of a binary SOPS file.
func emitBinary(doc *yaml.Node) ([]byte, error) {
	m := root(doc)
	if m == nil || len(m.Content) != 2 {
		return nil, errors.New("a binary SOPS file holds one key, data, beside sops")
	}
	d := child(m, "data")
	if d == nil || d.Kind != yaml.ScalarNode {
		return nil, errors.New("a binary SOPS file holds one key, data, beside sops")
	}
	return []byte(d.Value), nil
}

// emitJSON writes the opened JSON document, its keys in their order.
func emitJSON(doc *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, doc); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "    "); err != nil {
		return nil, fmt.Errorf("writing the opened document: %v", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return errors.New("a JSON SOPS file holds one document")
		}
		return writeJSON(b, n.Content[0])
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, err := json.Marshal(n.Content[i].Value)
			if err != nil {
				return err
			}
			b.Write(k)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		return writeJSONScalar(b, n)
	default:
		return errors.New("a JSON SOPS file holds no YAML aliases")
	}
	return nil
}

func writeJSONScalar(b *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		b.WriteString("null")
	case "!!bool", "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		switch v := v.(type) {
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case float64:
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
		default:
			fmt.Fprint(b, v)
		}
	default:
		s, err := json.Marshal(n.Value)
		if err != nil {
			return err
		}
		b.Write(s)
	}
	return nil
}
