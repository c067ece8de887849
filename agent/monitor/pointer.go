package monitor

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// parsePointer splits a JSON pointer (RFC 6901) into its unescaped tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("JSON pointer %q must start with /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// removePointer removes what a JSON pointer points at; a path that does not
// exist is no error (there is nothing to ignore).
func removePointer(doc interface{}, p string) error {
	tokens, err := parsePointer(p)
	if err != nil || len(tokens) == 0 {
		return err
	}
	parent := walk(doc, tokens[:len(tokens)-1])
	last := tokens[len(tokens)-1]
	switch c := parent.(type) {
	case map[string]interface{}:
		delete(c, last)
	case []interface{}:
		// Slices cannot shrink in place; blank the element so both sides
		// compare equal there.
		if i, err := strconv.Atoi(last); err == nil && i >= 0 && i < len(c) {
			c[i] = nil
		}
	}
	return nil
}

// setPointer sets the value a JSON pointer points at, creating maps on the
// way.
func setPointer(doc interface{}, p string, value interface{}) error {
	tokens, err := parsePointer(p)
	if err != nil || len(tokens) == 0 {
		return err
	}
	cur := doc
	for i, t := range tokens {
		lastToken := i == len(tokens)-1
		switch c := cur.(type) {
		case map[string]interface{}:
			if lastToken {
				c[t] = value
				return nil
			}
			next, ok := c[t]
			if !ok || next == nil {
				next = map[string]interface{}{}
				c[t] = next
			}
			cur = next
		case []interface{}:
			idx, err := strconv.Atoi(t)
			if err != nil || idx < 0 || idx >= len(c) {
				// No such element: as removePointer, nothing to set.
				return nil //nolint:nilerr // a token that is no index of the list points at nothing
			}
			if lastToken {
				c[idx] = value
				return nil
			}
			cur = c[idx]
		default:
			return nil
		}
	}
	return nil
}

func walk(doc interface{}, tokens []string) interface{} {
	cur := doc
	for _, t := range tokens {
		switch c := cur.(type) {
		case map[string]interface{}:
			cur = c[t]
		case []interface{}:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// operationValue decodes an operation's value, JSON or else a plain string.
func operationValue(v string) interface{} {
	var out interface{}
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return v
	}
	return out
}
